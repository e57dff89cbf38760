"""formats.int_echo against itself, scapy, and the C header (same bytes built by gcc)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import int_echo, roce
from formats.int_echo import EchoHop, IntEcho, IntEchoError, IntEchoHop

HEADER = Path(int_echo.__file__).resolve().parent.parent / "ebpf" / "int_formats.h"

HOPS = (EchoHop(0x01020304, 0xFFFFFFF0, 0x80000001, 2068, 4),
        EchoHop(7, 12345, 99, 0, 100_000))
# hop 0, hop 1, trailer: magic E1, version 1 / flags 0, 2 hops, 5 words
GOLDEN = bytes.fromhex("01020304" "fffffff0" "80000001" "00000814" "00000004"
                       "00000007" "00003039" "00000063" "00000000" "000186a0"
                       "e1100205")


def ack_payload(psn: int = 9) -> bytes:
    return roce.build_udp_payload(src="10.0.0.2", dst="10.0.0.1", sport=50001,
                                  opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=0x10203, psn=psn,
                                  aeth=(0, 3))


def test_golden_bytes():
    assert int_echo.encode_echo(HOPS) == GOLDEN
    assert int_echo.echo_len(2) == len(GOLDEN) == 44
    assert int_echo.ECHO_MAX_LEN == 164


def test_append_split_roundtrip_keeps_icrc():
    ack = ack_payload()
    wire = int_echo.append_echo(ack, HOPS)
    assert wire[4] & int_echo.ECHO_FLAG and wire.endswith(GOLDEN)
    plain, hops = int_echo.split_echo(wire)
    assert plain == ack and hops == HOPS
    assert roce.icrc_ok(plain, src=bytes([10, 0, 0, 2]), dst=bytes([10, 0, 0, 1]), sport=50001)
    # the flag alone (resv8a) does not disturb the ICRC either
    assert roce.icrc_ok(wire[:len(ack)], src=bytes([10, 0, 0, 2]), dst=bytes([10, 0, 0, 1]),
                        sport=50001)
    assert int_echo.split_echo(ack) == (ack, None)


def test_scapy_layer_decodes_and_builds_the_same_bytes():
    sc = IntEcho(GOLDEN)
    assert sc.magic == 0xE1 and sc.version == 1 and sc.hop_count == 2 and sc.hop_words == 5
    assert [(h.node_id, h.egress_ts, h.tx_bytes, h.queue_bytes, h.line_rate)
            for h in sc.hops] == [tuple(h.__getattribute__(f) for f in EchoHop.__slots__)
                                  for h in HOPS]
    built = IntEcho(hops=[IntEchoHop(node_id=h.node_id, egress_ts=h.egress_ts,
                                     tx_bytes=h.tx_bytes, queue_bytes=h.queue_bytes,
                                     line_rate=h.line_rate) for h in HOPS])
    assert bytes(built) == GOLDEN


@pytest.mark.parametrize("mutate,msg", [
    (lambda b: b[:-4] + b"\xe2\x10\x02\x05", "magic 0xe2"),
    (lambda b: b[:-4] + b"\xe1\x20\x02\x05", "version 2"),
    (lambda b: b[:-4] + b"\xe1\x10\x02\x06", "hop words 6"),
    (lambda b: b[:-4] + b"\xe1\x10\x09\x05", "hop count 9"),
    (lambda b: b[:-4] + b"\xe1\x10\x07\x05", "longer than"),
])
def test_malformed_trailers_are_named(mutate, msg):
    wire = mutate(int_echo.append_echo(ack_payload(), HOPS))
    with pytest.raises(IntEchoError, match=msg):
        int_echo.split_echo(wire)


def test_only_acks_carry_an_echo():
    cnp = roce.build_cnp(src="10.0.0.2", dst="10.0.0.1", sport=1, dest_qp=3)
    with pytest.raises(IntEchoError, match="ACKNOWLEDGE"):
        int_echo.append_echo(cnp, HOPS)
    with pytest.raises(IntEchoError, match="at most 8"):
        int_echo.encode_echo(HOPS * 5)


_hop = st.builds(EchoHop, *(st.integers(0, 2**32 - 1) for _ in range(5)))


@settings(max_examples=100, deadline=None)
@given(hops=st.lists(_hop, max_size=8), psn=st.integers(0, 2**24 - 1))
def test_property_roundtrip(hops, psn):
    ack = ack_payload(psn)
    assert int_echo.split_echo(int_echo.append_echo(ack, hops)) == (ack, tuple(hops))


C_PROBE = r"""
#include <stdio.h>
#include <stddef.h>
#include <arpa/inet.h>
#include "int_formats.h"
int main(void) {
  struct { struct int_echo_hop h[2]; struct int_echo_trailer t; } __attribute__((packed)) e;
  __u32 v[2][5] = {{0x01020304, 0xFFFFFFF0, 0x80000001, 2068, 4}, {7, 12345, 99, 0, 100000}};
  for (int i = 0; i < 2; i++) {
    e.h[i].node_id = htonl(v[i][0]); e.h[i].egress_ts = htonl(v[i][1]);
    e.h[i].tx_bytes = htonl(v[i][2]); e.h[i].queue_bytes = htonl(v[i][3]);
    e.h[i].line_rate = htonl(v[i][4]);
  }
  e.t.magic = ECHO_MAGIC; e.t.ver_flags = ECHO_VERSION << 4; e.t.hop_count = 2;
  e.t.hop_words = ECHO_HOP_WORDS;
  for (size_t i = 0; i < sizeof(e); i++) printf("%02x", ((unsigned char *)&e)[i]);
  printf("\n%zu %zu %d %d %d\n", sizeof(struct int_echo_hop), sizeof(struct int_echo_trailer),
         ECHO_MAX_LEN, ECHO_BTH_FLAG, (int)sizeof(((struct int_echo_entry *)0)->bytes));
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to compile the C probe")
def test_c_header_builds_the_same_bytes(tmp_path):
    src = tmp_path / "probe.c"
    src.write_text(C_PROBE)
    exe = tmp_path / "probe"
    subprocess.run(["gcc", "-Wall", "-Werror", "-I", str(HEADER.parent), "-o", str(exe),
                    str(src)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    assert bytes.fromhex(out[0]) == GOLDEN
    hop_len, trailer_len, max_len, flag, room = map(int, out[1:])
    assert (hop_len, trailer_len, max_len, flag) == (
        int_echo.ECHO_HOP_LEN, int_echo.ECHO_TRAILER_LEN, int_echo.ECHO_MAX_LEN,
        int_echo.ECHO_FLAG)
    assert room >= max_len
