"""Bit-level packet reader/writer and generated extract/pack plans."""
from __future__ import annotations

import pytest

from softswitch.errors import PacketError, PacketTooShort
from softswitch.packet import (
    PacketReader,
    PacketWriter,
    bits_to_bytes,
    make_extract_plan,
    make_pack_plan,
)


def test_extract_aligned_and_unaligned():
    r = PacketReader(bytes.fromhex("0123456789ab"))
    assert make_extract_plan([4, 12, 8])(r) == (0x0, 0x123, 0x45)
    assert r.bitpos == 24
    r = PacketReader(bytes.fromhex("0123"))
    r.take(3)
    assert make_extract_plan([5, 3])(r) == (0x1, 0x1)
    assert r.bitpos == 11


def test_extract_too_short_consumes_nothing():
    r = PacketReader(b"\x01\x02")
    with pytest.raises(PacketTooShort, match="need 24 bits at bit 0, only 16 left"):
        make_extract_plan([24], "h")(r)
    assert r.bitpos == 0


def test_peek_advance_payload():
    r = PacketReader(bytes.fromhex("aabbccdd"))
    assert r.peek(8) == 0xAA and r.bitpos == 0
    r.advance(16)
    assert r.payload() == bytes.fromhex("ccdd")
    with pytest.raises(PacketTooShort):
        r.advance(17)
    with pytest.raises(PacketError, match="negative"):
        r.advance(-1)


def test_writer_and_pack_plan():
    w = PacketWriter()
    w.put(make_pack_plan([4, 12, 8])(0, 0x123, 0x45), 24)
    w.put(0b101, 3)
    assert w.to_bytes() == bytes.fromhex("012345a0")
    assert bits_to_bytes(0b1, 1) == b"\x80"
