"""Bit-level packet reading and writing for the compiled parser and deparser.

Why this shape: P4 headers are runs of fixed-width fields at arbitrary bit
offsets. Reading one header as a single big integer (``int.from_bytes`` on the
byte slice that covers it) and then cutting fields out with precomputed shifts
and masks costs one C-level conversion per header instead of one per field.
`make_extract_plan` / `make_pack_plan` generate that code once per header type.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from softswitch.errors import PacketError, PacketTooShort


class PacketReader:
    """A cursor over the bytes of one packet, in bits (``packet_in``)."""

    __slots__ = ("bitpos", "data", "nbits")

    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.bitpos = 0
        self.nbits = len(self.data) * 8

    def peek(self, width: int) -> int:
        """Return the next `width` bits as an unsigned integer without consuming them."""
        start = self.bitpos
        end = start + width
        if end > self.nbits:
            raise PacketTooShort(
                f"packet: need {width} bits at bit {start}, only {self.nbits - start} left")
        if width == 0:
            return 0
        first = start >> 3
        last = (end + 7) >> 3
        value = int.from_bytes(self.data[first:last], "big")
        return (value >> ((last << 3) - end)) & ((1 << width) - 1)

    def take(self, width: int) -> int:
        """Return the next `width` bits and consume them."""
        value = self.peek(width)
        self.bitpos += width
        return value

    def advance(self, bits: int) -> None:
        """Skip `bits` bits (``packet_in.advance``)."""
        if bits < 0:
            raise PacketError(f"packet: advance by negative bit count {bits}")
        if self.bitpos + bits > self.nbits:
            raise PacketTooShort(
                f"packet: advance {bits} bits at bit {self.bitpos}, "
                f"only {self.nbits - self.bitpos} left")
        self.bitpos += bits

    def remaining_bits(self) -> int:
        return self.nbits - self.bitpos

    def payload(self) -> bytes:
        """The bytes the parser did not consume (appended after the deparsed headers)."""
        return self.data[(self.bitpos + 7) >> 3:]


class PacketWriter:
    """Accumulates emitted headers as one integer of `nbits` bits (``packet_out``)."""

    __slots__ = ("acc", "nbits")

    def __init__(self) -> None:
        self.acc = 0
        self.nbits = 0

    def put(self, value: int, width: int) -> None:
        """Append `width` bits holding `value` (already masked to the width)."""
        self.acc = (self.acc << width) | value
        self.nbits += width

    def to_bytes(self) -> bytes:
        """The emitted bits as bytes; a partial last byte is padded with zero bits."""
        pad = (-self.nbits) & 7
        return (self.acc << pad).to_bytes((self.nbits + pad) >> 3, "big")


def make_extract_plan(widths: Sequence[int], name: str = "header") -> Callable[[PacketReader], tuple[int, ...]]:
    """Return ``extract(reader) -> tuple`` reading fields of the given widths in order.

    The generated function reads the whole header with one ``int.from_bytes`` and
    splits it with constant shifts and masks (no loop per field at run time).
    """
    if any(w < 0 for w in widths):
        raise PacketError(f"{name}: negative field width in {list(widths)}")
    total = sum(widths)
    parts = []
    shift = total
    for w in widths:
        shift -= w
        parts.append(f"(v >> {shift}) & {(1 << w) - 1}" if w else "0")
    body = ", ".join(parts) + ("," if len(parts) == 1 else "")
    src = (
        f"def extract(r):\n"
        f"    p = r.bitpos\n"
        f"    e = p + {total}\n"
        f"    if e > r.nbits:\n"
        f"        raise PacketTooShort(f'{name}: need {total} bits at bit {{p}}, only {{r.nbits - p}} left')\n"
        f"    if not p & 7:\n"
        f"        v = int.from_bytes(r.data[p >> 3:(e + 7) >> 3], 'big')"
        + ("\n" if total % 8 == 0 else f" >> {(-total) & 7}\n") +
        f"    else:\n"
        f"        v = r.peek({total})\n"
        f"    r.bitpos = e\n"
        f"    return ({body})\n"
    )
    env: dict[str, object] = {"PacketTooShort": PacketTooShort}
    exec(compile(src, f"<extract {name}>", "exec"), env)  # noqa: S102 - generated code is the design
    return env["extract"]  # type: ignore[return-value]


def make_pack_plan(widths: Sequence[int], name: str = "header") -> Callable[..., int]:
    """Return ``pack(*values) -> int``: the fields concatenated, first field most significant.

    Values must already be masked to their widths (the compiled program keeps them so).
    """
    total = sum(widths)
    args = [f"f{i}" for i in range(len(widths))]
    shift = total
    terms = []
    for a, w in zip(args, widths):
        shift -= w
        terms.append(f"({a} << {shift})" if shift else a)
    src = f"def pack({', '.join(args)}):\n    return {' | '.join(terms) or '0'}\n"
    env: dict[str, object] = {}
    exec(compile(src, f"<pack {name}>", "exec"), env)  # noqa: S102 - generated code is the design
    return env["pack"]  # type: ignore[return-value]


def bits_to_bytes(value: int, nbits: int) -> bytes:
    """`value` of `nbits` bits as bytes, zero-padded at the end to a whole byte."""
    pad = (-nbits) & 7
    return (value << pad).to_bytes((nbits + pad) >> 3, "big")
