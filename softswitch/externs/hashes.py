"""Hash and checksum algorithms of v1model, computed as BMv2's simple_switch does.

The input is the field list packed most significant bit first into bytes (a
partial last byte is padded with zero bits at the end). Results are the raw
algorithm output; the v1model ``hash`` extern then maps it into
``base + (h % max)``.

| name | definition |
|---|---|
| crc16 | CRC-16/ARC: poly 0x8005 reflected, init 0, no final xor |
| crc32 | CRC-32 (IEEE 802.3): reflected, init and final xor 0xFFFFFFFF |
| crc16_custom / crc32_custom | same as crc16 / crc32 until reconfigured |
| identity | the bytes as a big-endian integer, last 8 bytes kept (uint64) |
| csum16 | ones' complement of the ones' complement sum of 16-bit words |
| xor16 | XOR of 16-bit words (odd last byte in the high half) |
| random | a random 32-bit value |
"""
from __future__ import annotations

import random
import sys
import zlib
from collections.abc import Callable, Sequence

from softswitch.errors import ExternError

_LITTLE = sys.byteorder == "little"


def reflected_crc_table(poly_reflected: int) -> list[int]:
    """The table of a reflected (LSB-first) CRC, e.g. 0xA001 for CRC-16/ARC; the eBPF
    target loads the same one into its kernel map."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly_reflected if c & 1 else c >> 1
        table.append(c)
    return table


def msb_crc_table(width: int, polynomial: int) -> list[int]:
    """The MSB-first table of a `width`-bit CRC's polynomial (`make_crc`'s; the eBPF
    target loads the same one for a custom CRC)."""
    top, mask = 1 << (width - 1), (1 << width) - 1
    table = []
    for i in range(256):
        c = i << (width - 8)
        for _ in range(8):
            c = ((c << 1) ^ polynomial) if c & top else (c << 1)
        table.append(c & mask)
    return table


_CRC16_TABLE = reflected_crc_table(0xA001)


def crc16(data: bytes) -> int:
    """CRC-16/ARC (BMv2 ``crc16``)."""
    c = 0
    t = _CRC16_TABLE
    for b in data:
        c = (c >> 8) ^ t[(c ^ b) & 0xFF]
    return c


def crc32(data: bytes) -> int:
    """CRC-32 as in Ethernet/zlib (BMv2 ``crc32``)."""
    return zlib.crc32(data) & 0xFFFFFFFF


def identity(data: bytes) -> int:
    """The input as an unsigned big-endian integer, truncated to 64 bits."""
    return int.from_bytes(data, "big") & 0xFFFFFFFFFFFFFFFF


def csum16(data: bytes) -> int:
    """Internet checksum (RFC 1071) of the bytes; an odd last byte is the high half of a word.

    Sums native-order 16-bit words in C (``memoryview.cast``) and swaps the folded
    result on little-endian hosts: the ones' complement sum commutes with byte order.
    """
    if len(data) & 1:
        data = data + b"\x00"
    s = sum(memoryview(data).cast("H"))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    if _LITTLE:
        s = ((s & 0xFF) << 8) | (s >> 8)
    return (~s) & 0xFFFF


def xor16(data: bytes) -> int:
    """XOR of the 16-bit words of the input."""
    if len(data) & 1:
        data = data + b"\x00"
    x = 0
    for i in range(0, len(data), 2):
        x ^= (data[i] << 8) | data[i + 1]
    return x


def make_crc(width: int, polynomial: int, initial: int, final_xor: int,
             reflect_input: bool, reflect_output: bool) -> Callable[[bytes], int]:
    """A CRC of `width` bits with the given parameters (how BMv2 configures crc*_custom).

    Table-driven, MSB-first internally; reflection of input bytes and output is applied
    as asked, so e.g. (16, 0x8005, 0, 0, True, True) is CRC-16/ARC and
    (32, 0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True) is CRC-32.
    """
    if width not in (16, 32):
        raise ExternError(f"custom CRC: width {width} not supported (16 or 32)")
    mask = (1 << width) - 1
    for name, v in (("polynomial", polynomial), ("initial", initial), ("final_xor", final_xor)):
        if not 0 <= v <= mask:
            raise ExternError(f"custom CRC{width}: {name} {v:#x} does not fit {width} bits")
    table = msb_crc_table(width, polynomial)
    rev8 = [int(f"{i:08b}"[::-1], 2) for i in range(256)]

    def crc(data: bytes) -> int:
        c = initial
        shift = width - 8
        for b in data:
            if reflect_input:
                b = rev8[b]
            c = ((c << 8) & mask) ^ table[((c >> shift) ^ b) & 0xFF]
        if reflect_output:
            c = int(f"{c:0{width}b}"[::-1], 2)
        return c ^ final_xor

    return crc


def _random(data: bytes) -> int:
    return random.getrandbits(32)


HASH_ALGORITHMS: dict[str, Callable[[bytes], int]] = {
    "crc16": crc16,
    "crc16_custom": crc16,
    "crc32": crc32,
    "crc32_custom": crc32,
    "identity": identity,
    "csum16": csum16,
    "xor16": xor16,
    "random": _random,
}


def fields_to_bytes(values: Sequence[int], widths: Sequence[int]) -> bytes:
    """Pack field values MSB first; pad the last partial byte with zeros at the end."""
    acc = 0
    n = 0
    for v, w in zip(values, widths):
        acc = (acc << w) | (v & ((1 << w) - 1))
        n += w
    pad = (-n) & 7
    return (acc << pad).to_bytes((n + pad) >> 3, "big")


def compute_hash(algorithm: str, values: Sequence[int], widths: Sequence[int]) -> int:
    """Raw hash of a field list with the named v1model algorithm."""
    fn = HASH_ALGORITHMS.get(algorithm)
    if fn is None:
        raise ExternError(f"hash: unknown algorithm {algorithm!r}, "
                          f"expected one of {sorted(HASH_ALGORITHMS)}")
    return fn(fields_to_bytes(values, widths))
