"""RoCEv2 byte builders against formats/FORMATS.md golden bytes and scapy.contrib.roce."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import AETH, BTH, CNPPadding
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from formats import roce
from formats.roce import Opcode

# WRITE_ONLY, QP 0x12, PSN 0xFFFFFE, AckReq, BECN, RETH(0x1000, 0xabc, 12), "hello world!"
GOLDEN_WRITE_ONLY = bytes.fromhex(
    "020000000002020000000001080045000048000040004011"
    "26a30a0000010a000002c00012b7003400000a00ffff4000"
    "001280fffffe000000000000100000000abc0000000c6865"
    "6c6c6f20776f726c64215dcb34a8"
)


def _scapy_frame(bth, tail: bytes = b"") -> bytes:
    return bytes(
        Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
        / IP(src="10.0.0.1", dst="10.0.0.2", flags="DF", id=0, ttl=64)
        / UDP(sport=49152, dport=4791, chksum=0)
        / bth
        / Raw(tail)
    )


def test_bth_bit_layout() -> None:
    b = roce.pack_bth(0x0A, 0xABCDEF, 0x123456, solicited=True, mig_req=True, pad_count=3,
                      tver=0, p_key=0x1234, fecn=True, becn=False, ack_req=True)
    assert b == bytes.fromhex("0af01234" "80abcdef" "80123456")
    assert roce.unpack_bth(b) == roce.Bth(
        opcode=0x0A, dest_qp=0xABCDEF, psn=0x123456, solicited=True, mig_req=True,
        pad_count=3, p_key=0x1234, fecn=True, ack_req=True)


def test_write_only_golden_and_scapy() -> None:
    f = roce.build_frame(src="10.0.0.1", dst="10.0.0.2", sport=49152,
                         opcode=Opcode.WRITE_ONLY, dest_qp=0x12, psn=0xFFFFFE,
                         payload=b"hello world!", reth=(0x1000, 0xABC, 12),
                         ack_req=True, becn=True)
    assert f == GOLDEN_WRITE_ONLY
    s = _scapy_frame(BTH(opcode=0x0A, dqpn=0x12, psn=0xFFFFFE, ackreq=1, becn=1),
                     roce.pack_reth(0x1000, 0xABC, 12) + b"hello world!")
    assert s == f
    hdr, pkt = roce.parse_frame(f)
    assert roce.verify_icrc(hdr, f[42:])
    assert pkt.reth == roce.Reth(va=0x1000, r_key=0xABC, dma_length=12)
    assert pkt.payload == b"hello world!"


@pytest.mark.parametrize("opcode", [Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE,
                                    Opcode.WRITE_LAST, Opcode.SEND_ONLY])
def test_data_opcodes_match_scapy(opcode: Opcode) -> None:
    reth = (7, 9, 4096) if opcode == Opcode.WRITE_FIRST else None
    f = roce.build_frame(src="10.0.0.1", dst="10.0.0.2", sport=49152, opcode=opcode,
                         dest_qp=5, psn=17, payload=bytes(range(64)), reth=reth)
    tail = (roce.pack_reth(*reth) if reth else b"") + bytes(range(64))
    assert f == _scapy_frame(BTH(opcode=int(opcode), dqpn=5, psn=17), tail)


def test_ack_nak_and_cnp_match_scapy() -> None:
    ack = roce.build_frame(src="10.0.0.1", dst="10.0.0.2", sport=49152,
                           opcode=Opcode.ACKNOWLEDGE, dest_qp=3, psn=99,
                           aeth=(roce.AethSyndrome.NAK_PSN_SEQ_ERROR, 7))
    s = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
              / IP(src="10.0.0.1", dst="10.0.0.2", flags="DF", id=0, ttl=64)
              / UDP(sport=49152, dport=4791, chksum=0)
              / BTH(opcode=0x11, dqpn=3, psn=99) / AETH(syndrome=0x60, msn=7))
    assert ack == s
    assert roce.to_scapy(ack)[AETH].syndrome == 0x60
    cnp = roce.build_cnp(src="10.0.0.1", dst="10.0.0.2", sport=49152, dest_qp=3)
    s = bytes(IP(src="10.0.0.1", dst="10.0.0.2", flags="DF", id=0, ttl=64)
              / UDP(sport=49152, dport=4791, chksum=0)
              / BTH(opcode=0x81, dqpn=3, becn=1) / CNPPadding())
    assert cnp == s[28:]


def test_icrc_ignores_variant_fields() -> None:
    """TTL, DSCP/ECN, IP checksum, UDP checksum and resv8a are masked."""
    f = bytearray(GOLDEN_WRITE_ONLY)
    hdr = bytearray(f[14:42])
    hdr[1] = 0xB8 | 3  # DSCP EF + CE
    hdr[8] = 3  # TTL
    hdr[10:12] = b"\x12\x34"
    hdr[26:28] = b"\xab\xcd"
    body = bytearray(f[42:])
    body[4] |= 0xC0  # FECN + BECN
    assert roce.verify_icrc(bytes(hdr), bytes(body))
    body[20] ^= 1  # payload bit flip
    assert not roce.verify_icrc(bytes(hdr), bytes(body))


def test_template_in_place_psn_and_icrc() -> None:
    t = roce.PacketTemplate(src="10.0.0.1", dst="10.0.0.2", sport=49152)
    buf = bytearray(GOLDEN_WRITE_ONLY[42:])
    buf[-4:] = bytes(4)
    t.finish(buf, psn=0xFFFFFE)
    assert bytes(buf) == GOLDEN_WRITE_ONLY[42:]
    t.finish(buf, psn=0x1000000 + 5)  # wraps to 5, AckReq kept
    pkt = roce.parse_udp_payload(buf)
    assert pkt.bth.psn == 5 and pkt.bth.ack_req
    assert t.check(buf, src=bytes([10, 0, 0, 1]), dst=bytes([10, 0, 0, 2]), sport=49152)


def test_psn_arithmetic_wraps() -> None:
    assert roce.psn_add(0xFFFFFF, 1) == 0
    assert roce.psn_diff(2, 0xFFFFFE) == 4
    assert roce.psn_diff(0xFFFFFE, 2) == -4
    assert roce.psn_lt(0xFFFFF0, 3)
    assert not roce.psn_lt(3, 0xFFFFF0)


def test_sack_and_fec_headers_round_trip() -> None:
    sack = roce.pack_sack(0xFFFFFF, bytes([0b10100000, 0, 0, 1]))
    blk = roce.unpack_sack(sack)
    assert blk.received_psns() == [0xFFFFFF, 1, 30]
    body = roce.build_udp_payload(src="10.0.0.1", dst="10.0.0.2", sport=1000,
                                  opcode=Opcode.ACKNOWLEDGE, dest_qp=1, psn=0xFFFFFE,
                                  aeth=(roce.AethSyndrome.ACK, 1), extra=sack)
    assert roce.parse_udp_payload(body).sack == blk
    fec = roce.pack_fec_header(k=8, m=2, index=1, symbol_len=1044, data_count=8)
    assert roce.unpack_fec_header(fec) == roce.FecHeader(k=8, m=2, index=1, symbol_len=1044,
                                                         data_count=8)


@pytest.mark.parametrize("bad", [b"", bytes(15), bytes([0x06]) + bytes(20),
                                 bytes([0x11]) + bytes(14)])
def test_truncated_packets_raise_named_errors(bad: bytes) -> None:
    with pytest.raises(roce.RoceFormatError, match="RoCEv2|BTH|RETH|AETH"):
        roce.parse_udp_payload(bad)


def test_out_of_range_fields_are_rejected() -> None:
    with pytest.raises(roce.RoceFormatError, match="BTH: psn=16777216"):
        roce.pack_bth(0x0A, 1, 1 << 24)
    with pytest.raises(roce.RoceFormatError, match="dest_qp"):
        roce.pack_bth(0x0A, -1, 0)


def test_numpy_dtypes_decode_headers() -> None:
    import numpy as np

    arr = np.frombuffer(GOLDEN_WRITE_ONLY[42:54], dtype=roce.BTH_DTYPE)
    assert int(arr["opcode"][0]) == 0x0A
    assert int(arr["dqp"][0]) & roce.PSN_MASK == 0x12
    assert int(arr["psn"][0]) & roce.PSN_MASK == 0xFFFFFE
    assert roce.BTH_DTYPE.itemsize == 12 and roce.RETH_DTYPE.itemsize == 16


# -- property tests: random header values, scapy as the independent reference -----------

_opcodes = st.sampled_from([Opcode.SEND_ONLY, Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE,
                            Opcode.WRITE_LAST, Opcode.WRITE_ONLY])


@settings(max_examples=60, deadline=None)
@given(op=_opcodes, qp=st.integers(0, 0xFFFFFF), psn=st.integers(0, 0xFFFFFF),
       sport=st.integers(1, 0xFFFF), payload=st.binary(max_size=300),
       ack=st.booleans(), fecn=st.booleans(), becn=st.booleans(), pkey=st.integers(0, 0xFFFF),
       va=st.integers(0, 2**64 - 1), rkey=st.integers(0, 2**32 - 1))
def test_random_packets_match_scapy_and_round_trip(op, qp, psn, sport, payload, ack, fecn,
                                                   becn, pkey, va, rkey) -> None:
    reth = (va, rkey, len(payload)) if op in roce.RETH_OPCODES else None
    f = roce.build_frame(src="10.1.2.3", dst="10.3.2.1", sport=sport, opcode=op, dest_qp=qp,
                         psn=psn, payload=payload, reth=reth, ack_req=ack, fecn=fecn,
                         becn=becn, p_key=pkey)
    s = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01")
              / IP(src="10.1.2.3", dst="10.3.2.1", flags="DF", id=0, ttl=64)
              / UDP(sport=sport, dport=4791, chksum=0)
              / BTH(opcode=int(op), dqpn=qp, psn=psn, ackreq=int(ack), fecn=int(fecn),
                    becn=int(becn), pkey=pkey)
              / Raw((roce.pack_reth(*reth) if reth else b"") + payload))
    assert f == s
    hdr, pkt = roce.parse_frame(f)
    assert roce.verify_icrc(hdr, f[42:])
    assert (pkt.bth.opcode, pkt.bth.dest_qp, pkt.bth.psn, pkt.bth.ack_req) == (op, qp, psn, ack)
    assert pkt.payload == payload
    assert roce.icrc_ok(f[42:], src=bytes([10, 1, 2, 3]), dst=bytes([10, 3, 2, 1]),
                        sport=sport)
