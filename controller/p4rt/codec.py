"""Match values and action parameters: pure encode / decode / format functions.

Why pure: the wire form is fixed by the P4Runtime spec (bytestrings in canonical form:
the shortest big-endian string, zero being one 0x00 byte; LPM values with the bits
beyond the prefix cleared; ternary values with the bits outside the mask cleared;
don't-care fields left out of the entry), so these functions are tested with tables
of cases and shared by writes, reads and reconciliation.  The bytes themselves are
:mod:`common.p4runtime.values`, the same code as the switch's server.

Accepted inputs for a value of `bitwidth` bits: an int, bytes (big-endian), a string
holding a number (decimal or 0x...), a dotted IPv4 address (32-bit fields) or a
colon MAC address (48-bit fields).  Per match kind:

=========  =====================================================================
exact      value
lpm        "10.0.1.0/24", (value, prefix_len); a /0 prefix is a don't-care
ternary    (value, mask), "value&&&mask", or value alone (full mask); mask 0 = don't-care
range      (low, high) or "low..high"; the full range is a don't-care
optional   value, or None for don't-care
=========  =====================================================================
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any

from p4.v1 import p4runtime_pb2 as P

from common.p4runtime import values

from .errors import CodecError
from .schema import MatchFieldInfo, MatchKind

_MAC = re.compile(r"^[0-9a-fA-F]{2}([:-][0-9a-fA-F]{2}){5}$")
_IPV4 = re.compile(r"^\d{1,3}(\.\d{1,3}){3}$")

Decoded = int | tuple[int, int] | None


def encode_bits(value: int, bitwidth: int, where: str) -> bytes:
    """Canonical bytestring of `value` (an unsigned int that must fit `bitwidth` bits)."""
    try:
        return values.encode_bits(value, bitwidth, where)
    except values.P4ValueError as exc:
        raise CodecError(str(exc)) from None


def decode_bits(data: bytes, bitwidth: int, where: str) -> int:
    """Int of a bytestring; padded forms are accepted, values wider than the field are not."""
    try:
        return values.decode_bits(data, bitwidth, where)
    except values.P4ValueError as exc:
        raise CodecError(str(exc)) from None


def parse_value(value: Any, bitwidth: int, where: str) -> int:
    """An int from any accepted value form (see the module docstring)."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, (bytes, bytearray)):
        result = int.from_bytes(value, "big") if value else -1
        if result < 0:
            raise CodecError(f"{where}: empty bytes value")
    elif isinstance(value, str):
        text = value.strip()
        try:
            if _MAC.match(text):
                result = int(text.replace(":", "").replace("-", ""), 16)
            elif _IPV4.match(text):
                result = int(ipaddress.IPv4Address(text))
            elif ":" in text and bitwidth == 128:
                result = int(ipaddress.IPv6Address(text))
            else:
                result = int(text, 0)
        except ValueError:
            raise CodecError(f"{where}: {value!r} is not a number, IPv4 or MAC address") from None
    else:
        raise CodecError(f"{where}: value {value!r} of type {type(value).__name__} is not accepted "
                         f"(int, str or bytes)")
    if result < 0 or result >> bitwidth:
        raise CodecError(f"{where}: value {value!r} does not fit bit<{bitwidth}>")
    return result


def format_value(value: int, bitwidth: int, name: str = "") -> str:
    """Readable form chosen by width and name: MAC for 48 bits, dotted quad for 32-bit
    fields named like addresses ("addr", "ip"), hex for bitmaps, instructions and masks,
    decimal otherwise."""
    low = name.lower()
    if bitwidth == 48 and ("mac" in low or not low):
        raw = value.to_bytes(6, "big")
        return ":".join(f"{b:02x}" for b in raw)
    if bitwidth == 32 and ("addr" in low or "ip" in low.split("_") or low.endswith("_ip")):
        return str(ipaddress.IPv4Address(value))
    if any(k in low for k in ("bitmap", "instruction", "mask", "flags")):
        return f"0x{value:0{(bitwidth + 3) // 4}x}"
    return str(value)


def _full(bitwidth: int) -> int:
    return (1 << bitwidth) - 1


def normalize_match(field: MatchFieldInfo, value: Any, where: str) -> Decoded:
    """Any accepted input -> the canonical decoded form (None = don't-care)."""
    w = field.bitwidth
    here = f"{where} field {field.name!r} ({field.kind!s}, {w} bits)"
    kind = field.kind
    if kind is MatchKind.EXACT:
        if value is None:
            raise CodecError(f"{here}: an exact field needs a value")
        return parse_value(value, w, here)
    if kind is MatchKind.OPTIONAL:
        return None if value is None else parse_value(value, w, here)
    if kind is MatchKind.LPM:
        if value is None:
            return None
        if isinstance(value, str) and "/" in value:
            v_s, _, plen_s = value.partition("/")
            try:
                value = (v_s, int(plen_s))
            except ValueError:
                raise CodecError(f"{here}: prefix length {plen_s!r} is not a number") from None
        if isinstance(value, tuple):
            if len(value) != 2:
                raise CodecError(f"{here}: expected (value, prefix_len), got {value!r}")
            v, plen = parse_value(value[0], w, here), value[1]
        else:
            v, plen = parse_value(value, w, here), w
        if not isinstance(plen, int) or not 0 <= plen <= w:
            raise CodecError(f"{here}: prefix length {plen!r} outside 0..{w}")
        if plen == 0:
            return None
        return (v & (_full(w) ^ _full(w - plen)), plen)
    if kind is MatchKind.TERNARY:
        if value is None:
            return None
        if isinstance(value, str) and "&&&" in value:
            value = tuple(value.split("&&&", 1))
        if isinstance(value, tuple):
            if len(value) != 2:
                raise CodecError(f"{here}: expected (value, mask), got {value!r}")
            v, m = parse_value(value[0], w, here), parse_value(value[1], w, here)
        else:
            v, m = parse_value(value, w, here), _full(w)
        if m == 0:
            return None
        return (v & m, m)
    if kind is MatchKind.RANGE:
        if value is None:
            return None
        if isinstance(value, str) and ".." in value:
            value = tuple(value.split("..", 1))
        if not isinstance(value, tuple) or len(value) != 2:
            raise CodecError(f"{here}: expected (low, high) or 'low..high', got {value!r}")
        lo, hi = parse_value(value[0], w, here), parse_value(value[1], w, here)
        if lo > hi:
            raise CodecError(f"{here}: range low {lo} above high {hi}")
        if lo == 0 and hi == _full(w):
            return None
        return (lo, hi)
    raise CodecError(f"{here}: match kind {kind!r} not supported")


def encode_match(field: MatchFieldInfo, value: Any, where: str = "") -> P.FieldMatch | None:
    """FieldMatch in canonical form, or None for a don't-care (left out of the entry)."""
    norm = normalize_match(field, value, where)
    if norm is None:
        return None
    w = field.bitwidth
    fm = P.FieldMatch(field_id=field.id)
    here = f"{where} field {field.name!r}"
    if field.kind is MatchKind.EXACT:
        fm.exact.value = encode_bits(norm, w, here)  # type: ignore[arg-type]
    elif field.kind is MatchKind.OPTIONAL:
        fm.optional.value = encode_bits(norm, w, here)  # type: ignore[arg-type]
    elif field.kind is MatchKind.LPM:
        v, plen = norm  # type: ignore[misc]
        fm.lpm.value = encode_bits(v, w, here)
        fm.lpm.prefix_len = plen
    elif field.kind is MatchKind.TERNARY:
        v, m = norm  # type: ignore[misc]
        fm.ternary.value = encode_bits(v, w, here)
        fm.ternary.mask = encode_bits(m, w, here)
    else:
        lo, hi = norm  # type: ignore[misc]
        fm.range.low = encode_bits(lo, w, here)
        fm.range.high = encode_bits(hi, w, here)
    return fm


def decode_match(field: MatchFieldInfo, fm: P.FieldMatch, where: str = "") -> Decoded:
    """The canonical decoded form of a FieldMatch read from a switch."""
    w = field.bitwidth
    here = f"{where} field {field.name!r}"
    which = fm.WhichOneof("field_match_type")
    expected = str(field.kind)
    if which != expected:
        raise CodecError(f"{here}: switch sent a {which} match, the P4Info says {expected}")
    if which == "exact":
        return decode_bits(fm.exact.value, w, here)
    if which == "optional":
        return decode_bits(fm.optional.value, w, here)
    if which == "lpm":
        v = decode_bits(fm.lpm.value, w, here)
        plen = fm.lpm.prefix_len
        return (v & (_full(w) ^ _full(w - plen)), plen)
    if which == "ternary":
        m = decode_bits(fm.ternary.mask, w, here)
        return (decode_bits(fm.ternary.value, w, here) & m, m)
    return (decode_bits(fm.range.low, w, here), decode_bits(fm.range.high, w, here))


def format_match(field: MatchFieldInfo, decoded: Decoded) -> str:
    """Readable form: '10.0.1.0/24', '4791&&&0xffff', '1..5', '*' for a don't-care."""
    w, n = field.bitwidth, field.name
    if decoded is None:
        return "*"
    if isinstance(decoded, int):
        return format_value(decoded, w, n)
    a, b = decoded
    if field.kind is MatchKind.LPM:
        return f"{format_value(a, w, n)}/{b}"
    if field.kind is MatchKind.TERNARY:
        return f"{format_value(a, w, n)}&&&{format_value(b, w, 'mask')}"
    return f"{format_value(a, w, n)}..{format_value(b, w, n)}"
