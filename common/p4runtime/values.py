"""P4Runtime byte strings and P4Data values <-> Python ints, with the spec's checks.

Why pure functions: every entity kind (match fields, action parameters, register
cells, digests, packet metadata) uses the same binary encoding of ``bit<W>``
values, so one decoder with one set of error messages covers them all.

The spec's canonical form is the shortest big-endian string (zero is one 0x00
byte); servers accept any length as long as the value fits in W bits, and always
answer in canonical form.
"""
from __future__ import annotations

from typing import Any

from p4.config.v1 import p4types_pb2
from p4.v1 import p4data_pb2

__all__ = ["P4ValueError", "bitwidth_of", "decode_bits", "decode_p4data", "decode_signed",
           "encode_bits", "encode_p4data", "encode_signed"]


class P4ValueError(ValueError):
    """A value that cannot be encoded or decoded; ``unsupported`` is set when the type
    itself is one this project does not handle (a server answers UNIMPLEMENTED)."""

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.unsupported = unsupported


def decode_bits(data: bytes, width: int, where: str) -> int:
    """The unsigned value of byte string `data` for a ``bit<width>`` object (width 0:
    any width)."""
    if not data:
        raise P4ValueError(f"{where}: empty byte string (a value needs at least one byte)")
    v = int.from_bytes(data, "big")
    if width and v >> width:
        raise P4ValueError(f"{where}: value 0x{data.hex()} does not fit bit<{width}>")
    return v


def encode_bits(value: int, width: int = 0, where: str = "") -> bytes:
    """Canonical byte string of a non-negative int (shortest, 0 -> b'\\x00'); with
    `width`, the value must fit ``bit<width>``."""
    v = int(value)
    here = f"{where}: " if where else ""
    if v < 0:
        raise P4ValueError(f"{here}value {v} is negative (no unsigned encoding)")
    if width and v >> width:
        raise P4ValueError(f"{here}value {v} (0x{v:x}) does not fit bit<{width}>")
    return v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")


def decode_signed(data: bytes, width: int, where: str) -> int:
    """An ``int<width>`` value: two's complement in `width` bits."""
    v = decode_bits(data, 0, where)
    if v >> width:
        raise P4ValueError(f"{where}: value 0x{data.hex()} does not fit int<{width}>")
    return v - (1 << width) if v >> (width - 1) else v


def encode_signed(value: int, width: int) -> bytes:
    return encode_bits(value & ((1 << width) - 1))


def bitwidth_of(spec: p4types_pb2.P4DataTypeSpec) -> tuple[int, bool]:
    """(width, signed) of a bitstring/bool type spec; unsupported for other types."""
    kind = spec.WhichOneof("type_spec")
    if kind == "bool":
        return 1, False
    if kind == "bitstring":
        bs = spec.bitstring
        which = bs.WhichOneof("type_spec")
        if which == "bit":
            return bs.bit.bitwidth, False
        if which == "int":
            return bs.int.bitwidth, True
    raise P4ValueError(f"P4Data of type {kind or 'unset'} is not supported (only bit<W>, int<W>, bool)",
                       unsupported=True)


def decode_p4data(data: p4data_pb2.P4Data, spec: p4types_pb2.P4DataTypeSpec, where: str) -> int:
    """An int from a P4Data holding a bitstring (or bool) of the type in `spec`."""
    width, signed = bitwidth_of(spec)
    kind = data.WhichOneof("data")
    if spec.WhichOneof("type_spec") == "bool":
        if kind != "bool":
            raise P4ValueError(f"{where}: expected a bool P4Data, got {kind or 'nothing'}")
        return int(data.bool)
    if kind != "bitstring":
        raise P4ValueError(f"{where}: expected a bitstring P4Data, got {kind or 'nothing'}")
    if signed:
        return decode_signed(data.bitstring, width, where)
    return decode_bits(data.bitstring, width, where)


def encode_p4data(value: Any, width: int = 0, signed: bool = False) -> p4data_pb2.P4Data:
    """A bitstring P4Data (bool values become a bool P4Data)."""
    if isinstance(value, bool):
        return p4data_pb2.P4Data(bool=value)
    v = int(value)
    return p4data_pb2.P4Data(bitstring=encode_signed(v, width) if signed and v < 0 else encode_bits(v))
