"""Hash algorithms as BMv2 computes them (vectors from the h5 conformance test)."""
from __future__ import annotations

import pytest

from softswitch.errors import ExternError
from softswitch.externs.hashes import (
    compute_hash,
    crc16,
    crc32,
    csum16,
    fields_to_bytes,
    identity,
    xor16,
)


@pytest.mark.parametrize("idx,val,c16,c32", [
    (0x03, 0x00000042, 0x31C4, 0x1950AD71),
    (0x03, 0xDEADBEEF, 0xE5DF, 0xDC5AF18B),
    (0x01, 0x00000005, 0xC3FD, 0x8B282A22),
    (0x02, 0x00000009, 0xC6B9, 0xC53E1CD9),
])
def test_crc_vectors(idx, val, c16, c32):
    assert compute_hash("crc16", [idx, val], [8, 32]) == c16
    assert compute_hash("crc32", [idx, val], [8, 32]) == c32
    assert compute_hash("crc16_custom", [idx, val], [8, 32]) == c16


def test_identity_csum16_xor16():
    assert identity(bytes.fromhex("00000042")) == 0x42
    assert identity(bytes(range(10))) == int.from_bytes(bytes(range(2, 10)), "big")
    assert compute_hash("csum16", [1, 3, 0x42], [8, 8, 32]) == 0xFEBA
    assert csum16(bytes.fromhex("4500002100010000401100000a0001010a000202")) == 0x63C9
    assert csum16(b"\x01") == (~0x0100) & 0xFFFF
    assert xor16(bytes.fromhex("12345678")) == 0x1234 ^ 0x5678
    assert crc16(b"123456789") == 0xBB3D      # CRC-16/ARC check value
    assert crc32(b"123456789") == 0xCBF43926  # CRC-32 check value


def test_field_packing_and_unknown_algorithm():
    assert fields_to_bytes([1, 0x7F], [1, 7]) == b"\xff"
    assert fields_to_bytes([1], [4]) == b"\x10"
    with pytest.raises(ExternError, match="unknown algorithm 'md5'"):
        compute_hash("md5", [1], [8])
