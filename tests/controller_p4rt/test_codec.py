"""Match value codecs: tables of cases (input -> canonical wire form -> decoded -> text)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from p4.v1 import p4runtime_pb2 as P

from controller.p4rt import CodecError, MatchKind, decode_bits, encode_bits, parse_value
from controller.p4rt.codec import decode_match, encode_match, format_match, format_value
from controller.p4rt.schema import MatchFieldInfo


def mf(kind: MatchKind, width: int, name: str = "f") -> MatchFieldInfo:
    return MatchFieldInfo(id=7, name=name, bitwidth=width, kind=kind)


@pytest.mark.parametrize("value,width,wire", [
    (0, 9, b"\x00"),
    (1, 9, b"\x01"),
    (255, 9, b"\xff"),
    (256, 9, b"\x01\x00"),
    (511, 9, b"\x01\xff"),
    (0x0A000001, 32, b"\x0a\x00\x00\x01"),
    (0x00000001, 32, b"\x01"),
    (0x0000_0a00_0101, 48, b"\x0a\x00\x01\x01"),
    ((1 << 128) - 1, 128, b"\xff" * 16),
])
def test_encode_bits_is_canonical(value: int, width: int, wire: bytes) -> None:
    assert encode_bits(value, width, "w") == wire
    assert decode_bits(wire, width, "w") == value


@pytest.mark.parametrize("value,width,message", [
    (512, 9, "does not fit bit<9>"),
    (-1, 8, "negative"),
])
def test_encode_bits_rejects(value: int, width: int, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        encode_bits(value, width, "where")


def test_decode_bits_accepts_padding_but_not_overflow() -> None:
    assert decode_bits(b"\x00\x00\x01\xff", 9, "w") == 511
    with pytest.raises(CodecError, match="0x0200 does not fit bit<9>"):
        decode_bits(b"\x02\x00", 9, "w")
    with pytest.raises(CodecError, match="empty"):
        decode_bits(b"", 9, "w")


@pytest.mark.parametrize("text,width,value", [
    ("10.0.1.2", 32, 0x0A000102),
    ("00:00:0a:00:01:01", 48, 0x0A000101),
    ("02-00-00-00-00-03", 48, 0x020000000003),
    ("0x12b7", 16, 4791),
    ("4791", 16, 4791),
    (b"\x12\xb7", 16, 4791),
    (True, 1, 1),
])
def test_parse_value_forms(text: object, width: int, value: int) -> None:
    assert parse_value(text, width, "w") == value


@pytest.mark.parametrize("text,width,message", [
    ("10.0.1.300", 32, "not a number, IPv4 or MAC"),
    ("hello", 16, "not a number"),
    ("10.0.0.1", 16, "does not fit bit<16>"),
    (3.5, 16, "type float"),
])
def test_parse_value_rejects(text: object, width: int, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        parse_value(text, width, "w")


# kind, width, input, expected FieldMatch text (None = don't care), decoded, formatted
CASES = [
    (MatchKind.EXACT, 9, 5, 'exact { value: "\\005" }', 5, "5"),
    (MatchKind.EXACT, 32, "10.0.0.1", 'exact { value: "\\n\\000\\000\\001" }', 0x0A000001, "10.0.0.1"),
    (MatchKind.LPM, 32, "10.0.1.0/24", 'lpm { value: "\\n\\000\\001\\000" prefix_len: 24 }',
     (0x0A000100, 24), "10.0.1.0/24"),
    # host bits beyond the prefix are cleared (canonical form)
    (MatchKind.LPM, 32, "10.0.1.77/24", 'lpm { value: "\\n\\000\\001\\000" prefix_len: 24 }',
     (0x0A000100, 24), "10.0.1.0/24"),
    (MatchKind.LPM, 32, ("10.0.1.1", 32), 'lpm { value: "\\n\\000\\001\\001" prefix_len: 32 }',
     (0x0A000101, 32), "10.0.1.1/32"),
    (MatchKind.LPM, 32, "0.0.0.0/0", None, None, "*"),
    (MatchKind.TERNARY, 16, (4791, 0xFFFF), 'ternary { value: "\\022\\267" mask: "\\377\\377" }',
     (4791, 0xFFFF), "4791&&&0xffff"),
    # value bits outside the mask are cleared
    (MatchKind.TERNARY, 16, "0x12ff&&&0xff00", 'ternary { value: "\\022\\000" mask: "\\377\\000" }',
     (0x1200, 0xFF00), "4608&&&0xff00"),
    (MatchKind.TERNARY, 16, 7, 'ternary { value: "\\007" mask: "\\377\\377" }', (7, 0xFFFF), "7&&&0xffff"),
    (MatchKind.TERNARY, 16, (5, 0), None, None, "*"),
    (MatchKind.RANGE, 16, (1, 5), 'range { low: "\\001" high: "\\005" }', (1, 5), "1..5"),
    (MatchKind.RANGE, 16, "0..65535", None, None, "*"),
    (MatchKind.OPTIONAL, 9, 3, 'optional { value: "\\003" }', 3, "3"),
    (MatchKind.OPTIONAL, 9, None, None, None, "*"),
]


@pytest.mark.parametrize("kind,width,given,wire,decoded,text", CASES)
def test_match_round_trip(kind: MatchKind, width: int, given: object, wire: str | None,
                          decoded: object, text: str) -> None:
    name = "dst_addr" if width == 32 else "f"
    field = mf(kind, width, name)
    fm = encode_match(field, given, "table t")
    if wire is None:
        assert fm is None
    else:
        assert fm is not None
        expect = P.FieldMatch()
        from google.protobuf import text_format
        text_format.Parse(f"field_id: 7 {wire}", expect)
        assert fm == expect
        assert decode_match(field, fm) == decoded
    assert format_match(field, decoded) == text


@pytest.mark.parametrize("kind,width,given,message", [
    (MatchKind.EXACT, 9, None, "an exact field needs a value"),
    (MatchKind.EXACT, 9, 600, "does not fit bit<9>"),
    (MatchKind.LPM, 32, "10.0.0.0/33", "prefix length 33 outside 0..32"),
    (MatchKind.LPM, 32, "10.0.0.0/x", "prefix length 'x' is not a number"),
    (MatchKind.RANGE, 16, (9, 2), "range low 9 above high 2"),
    (MatchKind.RANGE, 16, 5, "expected \\(low, high\\)"),
    (MatchKind.TERNARY, 16, (1, 2, 3), "expected \\(value, mask\\)"),
])
def test_match_rejects_with_field_named(kind: MatchKind, width: int, given: object, message: str) -> None:
    with pytest.raises(CodecError, match=message) as ei:
        encode_match(mf(kind, width, "port"), given, "table T")
    assert "table T field 'port'" in str(ei.value)


def test_decode_match_checks_kind() -> None:
    fm = P.FieldMatch(field_id=7)
    fm.exact.value = b"\x01"
    with pytest.raises(CodecError, match="switch sent a exact match, the P4Info says lpm"):
        decode_match(mf(MatchKind.LPM, 32), fm)


@pytest.mark.parametrize("value,width,name,text", [
    (0x020000000003, 48, "src_mac", "02:00:00:00:00:03"),
    (0x0A000001, 32, "collector_ip", "10.0.0.1"),
    (100, 32, "line_rate_mbps", "100"),
    (0x9400, 16, "instruction_bitmap", "0x9400"),
    (5, 9, "port", "5"),
])
def test_format_value(value: int, width: int, name: str, text: str) -> None:
    assert format_value(value, width, name) == text


# ---------------------------------------------------------------- properties


@st.composite
def width_and_value(draw):  # type: ignore[no-untyped-def]
    w = draw(st.integers(min_value=1, max_value=128))
    return w, draw(st.integers(min_value=0, max_value=(1 << w) - 1))


@given(width_and_value())
def test_bits_round_trip_and_canonical(wv: tuple[int, int]) -> None:
    w, v = wv
    wire = encode_bits(v, w, "w")
    assert decode_bits(wire, w, "w") == v
    assert wire == b"\x00" or wire[0] != 0          # shortest form
    assert decode_bits(b"\x00\x00" + wire, w, "w") == v


@given(width_and_value(), st.data())
def test_lpm_and_ternary_decode_what_they_encode(wv: tuple[int, int], data: st.DataObject) -> None:
    w, v = wv
    plen = data.draw(st.integers(min_value=0, max_value=w))
    lpm = mf(MatchKind.LPM, w)
    fm = encode_match(lpm, (v, plen))
    if plen == 0:
        assert fm is None
    else:
        assert fm is not None
        got = decode_match(lpm, fm)
        assert got == (v >> (w - plen) << (w - plen), plen)
        assert encode_match(lpm, got) == fm          # idempotent: canonical in, same wire out
    mask = data.draw(st.integers(min_value=0, max_value=(1 << w) - 1))
    tern = mf(MatchKind.TERNARY, w)
    fm = encode_match(tern, (v, mask))
    if mask == 0:
        assert fm is None
    else:
        assert fm is not None and decode_match(tern, fm) == (v & mask, mask)
