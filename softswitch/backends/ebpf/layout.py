"""C types of P4 values: scalar widths, header/struct declarations, byte packing.

Why separate: the structs the generated program keeps per packet, the bit-exact
(un)packing of header bytes and the field lists of checksums all derive from the same
field widths; the runtime's map writer uses `ctype_bits` too.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.frontend import types as T

C_KEYWORDS = frozenset(["auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "u8", "u16", "u32", "u64", "u128", "s8", "s16", "s32", "s64", "P", "skb", "ctx"])


def cname(name: str) -> str:
    """A P4 identifier as a C identifier (keywords get a trailing underscore)."""
    n = re.sub(r"\W", "_", name)
    return n + "_" if n in C_KEYWORDS else n


def strip(t: Any) -> Any:
    """The representation type: new types and serializable enums by their underlying type."""
    while True:
        if isinstance(t, (T.NewType, T.SerEnumType)):
            t = t.underlying
        else:
            return t


def scalar_width(t: Any, node: Any) -> int:
    """Bits of a scalar value (bit<W>, bool, error); refuses what the back end cannot hold."""
    t = strip(t)
    if isinstance(t, T.BitsType):
        if t.width > MAX_WIDTH:
            raise EbpfUnsupported(node, f"{t} (wider than {MAX_WIDTH} bits: BPF registers hold 64 "
                                        "and clang's widest BPF integer is unsigned __int128; a "
                                        "header field this wide is only extracted, emitted, copied "
                                        "and compared with its header)")
        return t.width
    if isinstance(t, T.BoolType):
        return 1
    if isinstance(t, T.ErrorType):
        return 32
    raise EbpfUnsupported(node, f"values of type {t}")


def wide_byte(field: str, i: int) -> str:
    """The name of byte `i` (from the top) of a header field wider than `MAX_WIDTH`."""
    return f"{field}__b{i}"


def is_signed(t: Any) -> bool:
    """int<W> (held as its W-bit two's complement pattern, like bit<W>)."""
    t = strip(t)
    return isinstance(t, T.BitsType) and t.signed


def sext(x: str, width: int) -> str:
    """C expression: the W-bit two's complement pattern `x` as a signed 64-bit value
    (over 64 bits: clang's ``__int128``)."""
    if width > 64:
        return f"((__int128)((u128)({x}) << {128 - width}) >> {128 - width})"
    if width >= 64:
        return f"((s64)(u64)({x}))"
    return f"(((s64)((u64)({x}) << {64 - width})) >> {64 - width})"


MAX_WIDTH = 128   # bit<65> .. bit<128> are unsigned __int128 (u128): add, compare, logic, constant shifts


def ctype_bits(width: int) -> int:
    return 8 if width <= 8 else 16 if width <= 16 else 32 if width <= 32 else 64 if width <= 64 else 128


def ctype(width: int) -> str:
    return f"u{ctype_bits(width)}"


def wide(width: int) -> str:
    """The C type arithmetic on a value of `width` bits is done in."""
    return "u128" if width > 64 else "u64"


def const(value: int) -> str:
    """A C constant of up to 128 bits (C has no literal wider than 64)."""
    if value >> 64:
        return f"(((u128)0x{value >> 64:x}ULL << 64) | 0x{value & ((1 << 64) - 1):x}ULL)"
    return f"0x{value:x}ULL"


def mask(width: int) -> str:
    """The all-ones C constant of `width` bits."""
    return const((1 << width) - 1)


@dataclass(slots=True)
class HeaderLayout:
    """A header type: fields with bit offsets, total bytes."""

    name: str
    fields: list[tuple[str, int, int]]   # (name, bit offset, width)
    size_bytes: int                      # the fixed part
    varbit: tuple[str, int] | None = None  # a last varbit field: (name, maximum bits)


@dataclass(slots=True)
class Layouts:
    """Every struct/header type the program needs, declared once, in dependency order."""

    decls: list[str] = field(default_factory=list)
    headers: dict[str, HeaderLayout] = field(default_factory=dict)
    top_level: dict[str, Any] = field(default_factory=dict)   # type name -> declaration
    _done: set[tuple[str, str]] = field(default_factory=set)
    tuples: dict[str, str] = field(default_factory=dict)   # tuple type -> its struct's name

    def _field_node(self, type_name: str, fname: str, node: Any) -> Any:
        """The field's declaration (for its location in errors), else `node`."""
        decl = self.top_level.get(type_name)
        for f in getattr(decl, "fields", None) or []:
            if getattr(f, "name", None) == fname:
                return f
        return node

    def struct_name(self, t: Any, node: Any) -> str:
        t = strip(t)
        if isinstance(t, T.HeaderType):
            self.header(t, node)
            return f"struct h_{cname(t.name)}"
        if isinstance(t, T.StructType):
            self._struct(t, node)
            return f"struct s_{cname(t.name)}"
        if isinstance(t, T.StackType):
            raise EbpfUnsupported(node, f"header stack {t} as a value")
        if isinstance(t, T.HeaderUnionType):
            self._struct(t, node, prefix="u")
            return f"struct u_{cname(t.name)}"
        if isinstance(t, T.TupleType):          # a struct of fields f0, f1, ...
            name = self.tuples.setdefault(str(t), f"tuple_{len(self.tuples)}")
            self._struct(T.StructType(name=name, fields=fields_of(t)), node, prefix="t")
            return f"struct t_{name}"
        raise EbpfUnsupported(node, f"values of type {t}")

    def header(self, t: T.HeaderType, node: Any) -> HeaderLayout:
        got = self.headers.get(t.name)
        if got is not None:
            return got
        fields: list[tuple[str, int, int]] = []
        off = 0
        varbit: tuple[str, int] | None = None
        lines = [f"struct h_{cname(t.name)} {{", "    u8 _valid;"]
        for k, (fname, ftype) in enumerate(t.fields):
            node = self._field_node(t.name, fname, node)
            vt = strip(ftype)
            if isinstance(vt, T.VarbitType):
                if k != len(t.fields) - 1 or vt.max_width % 8:
                    raise EbpfUnsupported(node, f"varbit field {t.name}.{fname} (only a last "
                                                "field of whole bytes)")
                varbit = (fname, vt.max_width)
                lines += [f"    u8 {cname(fname)}[{stack_slots(vt.max_width // 8 + 1)}];",
                          f"    u32 {cname(fname)}__bits;"]
                continue
            if isinstance(strip(ftype), T.StructType):
                raise EbpfUnsupported(node, f"struct-typed header field {t.name}.{fname}")
            if isinstance(vt, T.BitsType) and not vt.signed and vt.width > MAX_WIDTH:
                # wider than any C integer: its bytes, as the packet has them (extracted,
                # emitted and copied with its header; an expression using it is refused)
                for i in range(0, vt.width, 8):
                    fields.append((wide_byte(fname, i // 8), off + i, min(8, vt.width - i)))
                    lines.append(f"    u8 {cname(wide_byte(fname, i // 8))};")
                off += vt.width
                continue
            w = scalar_width(ftype, node)
            fields.append((fname, off, w))
            lines.append(f"    {ctype(w)} {cname(fname)};")
            off += w
        if off % 8:
            raise EbpfUnsupported(node, f"header {t.name} of {off} bits (not whole bytes)")
        lines.append("};")
        hl = HeaderLayout(name=t.name, fields=fields, size_bytes=off // 8, varbit=varbit)
        self.headers[t.name] = hl
        self.decls.append("\n".join(lines))
        return hl

    def _struct(self, t: T.StructType | T.HeaderUnionType, node: Any, prefix: str = "s") -> None:
        """A struct, or a header union (``u_``: its member headers side by side; at most
        one valid is the generator's job, as on the Python target)."""
        if (prefix, t.name) in self._done:
            return
        lines = [f"struct {prefix}_{cname(t.name)} {{"]
        for fname, ftype in t.fields:
            ft = strip(ftype)
            fnode = self._field_node(t.name, fname, node)
            if isinstance(ft, T.StackType) and isinstance(strip(ft.elem), (T.HeaderType, T.HeaderUnionType)):
                elem = self.struct_name(strip(ft.elem), fnode)
                lines.append(f"    {elem} {cname(fname)}[{stack_slots(ft.size)}];")
                lines.append(f"    u32 {cname(fname)}__next;")
            elif isinstance(ft, (T.HeaderType, T.StructType, T.StackType, T.HeaderUnionType)):
                lines.append(f"    {self.struct_name(ft, fnode)} {cname(fname)};")
            else:
                lines.append(f"    {ctype(scalar_width(ft, fnode))} {cname(fname)};")
        if len(lines) == 1:
            lines.append("    u8 _unused;")
        lines.append("};")
        self._done.add((prefix, t.name))
        self.decls.append("\n".join(lines))


def fields_of(t: Any) -> tuple[tuple[str, Any], ...]:
    """(name, type) of a struct-like type's fields; a tuple's are f0, f1, ..."""
    if isinstance(t, T.TupleType):
        return tuple((f"f{i}", et) for i, et in enumerate(t.elems))
    return tuple(t.fields)


def stack_slots(size: int) -> int:
    """Array length of a stack of `size`: the next power of two, so an index masked with
    ``slots - 1`` is always inside the array (what the verifier needs to see)."""
    n = 1
    while n < size:
        n <<= 1
    return n


def read_bits(buf: str, bit_off: int, width: int) -> str:
    """C expression: the `width`-bit big-endian field at `bit_off` of byte array `buf`."""
    first, last = bit_off // 8, (bit_off + width - 1) // 8
    parts = []
    nbytes = last - first + 1
    wt = "u128" if nbytes > 8 else "u64"
    for i in range(first, last + 1):
        parts.append(f"(({wt}){buf}[{i}] << {8 * (last - i)})")
    expr = " | ".join(parts)
    shift = 8 * nbytes - (bit_off % 8) - width
    if shift:
        expr = f"(({expr}) >> {shift})"
    if width < 8 * nbytes:
        expr = f"(({expr}) & {mask(width)})"
    return f"({expr})"


def write_bytes(buf: str, pieces: Sequence[tuple[str, int]]) -> list[str]:
    """C statements storing the concatenation of `pieces` (expr, width) into `buf`."""
    out = []
    total = sum(w for _, w in pieces)
    nbytes = (total + 7) // 8
    for i in range(nbytes):
        lo, hi = 8 * i, 8 * i + 8            # bit range of this byte, from the top
        terms = []
        off = 0
        for expr, w in pieces:
            a, b = max(lo, off), min(hi, off + w)
            if a < b:
                # bits a..b of the stream = field bits (a-off)..(b-off) from its top
                shift_down = off + w - b        # drop the field's lower bits below this byte
                take = b - a
                val = f"(({expr}) >> {shift_down})" if shift_down else f"({expr})"
                val = f"({val} & {mask(take)})"
                shift_up = hi - b
                terms.append(f"({val} << {shift_up})" if shift_up else val)
            off += w
        out.append(f"{buf}[{i}] = (u8)({' | '.join(terms) or '0'});")
    return out


def words16(pieces: Sequence[tuple[str, int]]) -> list[str]:
    """C expressions of the 16-bit words of the concatenation (zero padded at the end)."""
    total = sum(w for _, w in pieces)
    nwords = (total + 15) // 16
    out = []
    for j in range(nwords):
        lo, hi = 16 * j, 16 * j + 16
        terms = []
        off = 0
        for expr, w in pieces:
            a, b = max(lo, off), min(hi, off + w)
            if a < b:
                shift_down = off + w - b
                val = f"(({expr}) >> {shift_down})" if shift_down else f"({expr})"
                val = f"((u64){val} & {mask(b - a)})"
                shift_up = hi - b
                terms.append(f"({val} << {shift_up})" if shift_up else val)
            off += w
        out.append(" | ".join(terms) or "0")
    return out
