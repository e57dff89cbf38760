"""formats.int_md against itself, scapy, and the C header (sizes and offsets by gcc)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from formats import int_md
from formats.int_md import (
    HOP_RECORD_DTYPE,
    HOST_RECORD_DTYPE,
    HPCC_DS_INSTRUCTION,
    HPCC_INSTRUCTION_BITMAP,
    HopRecord,
    IntFormatError,
    IntMD,
    IntShim,
)

HEADER = Path(int_md.__file__).resolve().parent.parent / "ebpf" / "int_formats.h"


def roce_frame(psn: int = 7, qp: int = 0x12, payload: bytes = b"p" * 40) -> bytes:
    return bytes(Ether() / IP(src="10.1.0.1", dst="10.1.0.2", tos=0x02)
                 / UDP(sport=49152, dport=4791, chksum=0)
                 / BTH(opcode=0x04, dqpn=qp, psn=psn) / Raw(payload))


def full_hop(i: int) -> HopRecord:
    return HopRecord(node_id=100 + i, ingress_port=i + 1, egress_port=i + 2,
                     hop_latency=10 * i + 3, queue_id=i, queue_occupancy=1000 + i,
                     ingress_ts=(1 << 40) + i, egress_ts=(1 << 41) + i, tx_util=5 + i,
                     tx_bytes=0xFFFF0000 + i, queue_bytes=1500 * i, line_rate=25000)


def test_constants_follow_formats_md():
    assert int_md.INT_UDP_PORT == 7777
    assert int_md.INT_DS_ID_HPCC == 0x4850
    assert HPCC_INSTRUCTION_BITMAP == int_md.bit(0) | int_md.bit(3) | int_md.bit(5) == 0x9400
    assert HPCC_DS_INSTRUCTION == int_md.bit(0) | int_md.bit(1) | int_md.bit(2) == 0xE000
    assert int_md.hop_words(HPCC_INSTRUCTION_BITMAP, HPCC_DS_INSTRUCTION) * 4 == 28


@pytest.mark.parametrize("ins,ds,size", [
    (0x8000, 0, 4), (0xC000, 0, 8), (0x9400, 0xE000, 28), (0xFD00, 0xE000, 48), (0x0800, 0x2000, 12),
])
def test_hop_sizes(ins, ds, size):
    assert len(int_md.encode_hop(full_hop(1), ins, ds)) == size
    assert int_md.hop_words(ins, ds) == size // 4


@pytest.mark.parametrize("nhops", range(9))
def test_insert_parse_strip_roundtrip(nhops):
    frame = roce_frame()
    hops = [full_hop(i) for i in range(nhops)]
    pkt = int_md.insert_int(frame, hops, instruction_bitmap=0xFD00, ds_instruction=0xE000)
    hdr = int_md.parse_int(pkt)
    assert hdr is not None and list(hdr.hops) == hops
    assert hdr.remaining_hop_count == 8 - nhops
    assert int_md.strip_int(pkt) == frame
    parsed = Ether(pkt)
    assert parsed[UDP].dport == 7777 and parsed[IntShim].orig_dport == 4791
    assert parsed[IntMD].hops() == hops
    assert parsed[BTH].psn == 7 and parsed[BTH].dqpn == 0x12
    assert parsed[IP].len == len(pkt) - 14 and IP(bytes(parsed[IP])).chksum == parsed[IP].chksum


def test_masked_hops_keep_only_bitmap_fields():
    h = full_hop(3)
    got = int_md.decode_hops(int_md.encode_hop(h, 0x9400, 0xE000), 0x9400, 0xE000)[0]
    assert got == h.masked(0x9400, 0xE000)
    assert got.ingress_port == 0 and got.queue_occupancy == h.queue_occupancy


def test_scapy_builds_same_bytes_as_insert_int():
    frame = roce_frame()
    hops = [full_hop(0), full_hop(1)]
    pkt = Ether(frame)
    stack = int_md.encode_hops(hops, HPCC_INSTRUCTION_BITMAP, HPCC_DS_INSTRUCTION)
    udp = pkt[UDP]
    inner = udp.payload
    built = (Ether(bytes(pkt)[:14]) / IP(src="10.1.0.1", dst="10.1.0.2", tos=0x02)
             / UDP(sport=49152, dport=7777, chksum=0) / IntShim(orig_dport=4791)
             / IntMD(remaining_hop_count=6, hop_stack=stack) / inner)
    assert bytes(built) == int_md.insert_int(frame, hops)


@pytest.mark.parametrize("kw,msg", [
    ({"instruction_bitmap": 0x0200}, "unsupported bits 0x0200"),
    ({"ds_instruction": 0x1000}, "DS instruction bitmap 0x1000"),
])
def test_bad_bitmaps_are_named(kw, msg):
    with pytest.raises(IntFormatError, match=msg):
        int_md.insert_int(roce_frame(), [full_hop(0)], **kw)


def test_parse_rejects_hop_ml_mismatch():
    pkt = int_md.insert_int(roce_frame(), [full_hop(0)], hop_ml=5)
    with pytest.raises(IntFormatError, match="hop ML 5 does not match"):
        int_md.parse_int(pkt)


def test_path_signature_known_value():
    assert int_md.path_signature([]) == 0x811C9DC5
    assert int_md.path_signature([1, 2]) != int_md.path_signature([2, 1])


def test_hops_to_array():
    arr = int_md.hops_to_array([full_hop(0), full_hop(1)])
    assert arr.dtype == HOP_RECORD_DTYPE and arr["node_id"].tolist() == [100, 101] + [0] * 6


C_PROBE = r"""
#include <stdio.h>
#include <stddef.h>
#include "int_formats.h"
#define F(s, f) printf(#s " " #f " %zu %zu\n", offsetof(struct s, f), sizeof(((struct s *)0)->f));
int main(void) {
  printf("int_hop_rec SIZE %zu 0\n", sizeof(struct int_hop_rec));
  printf("int_host_record SIZE %zu 0\n", sizeof(struct int_host_record));
  printf("int_flow_key SIZE %zu 0\n", sizeof(struct int_flow_key));
  printf("int_flow_stats SIZE %zu 0\n", sizeof(struct int_flow_stats));
  %FIELDS%
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc to compile the C probe")
def test_numpy_dtypes_mirror_c_structs(tmp_path):
    from ebpf.records import FLOW_KEY_DTYPE, FLOW_STATS_DTYPE
    structs = (("int_hop_rec", HOP_RECORD_DTYPE), ("int_host_record", HOST_RECORD_DTYPE),
               ("int_flow_key", FLOW_KEY_DTYPE), ("int_flow_stats", FLOW_STATS_DTYPE))
    lines = []
    for sname, dt in structs:
        for name in dt.names:
            lines.append(f"F({sname}, {name})")
    src = tmp_path / "probe.c"
    src.write_text(C_PROBE.replace("%FIELDS%", "\n  ".join(lines)))
    exe = tmp_path / "probe"
    subprocess.run(["gcc", "-Wall", "-Werror", "-I", str(HEADER.parent), "-o", str(exe),
                    str(src)], check=True, capture_output=True, text=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    seen = {}
    for line in out.splitlines():
        sname, field, off, size = line.split()
        seen[(sname, field)] = (int(off), int(size))
    for sname, dt in structs:
        assert seen[(sname, "SIZE")][0] == dt.itemsize, sname
        for name in dt.names:
            ftype, off = dt.fields[name][:2]
            assert seen[(sname, name)] == (off, ftype.itemsize), (sname, name)
    # the C enum of counters and the Python one agree, slot by slot
    from ebpf.records import SinkStat
    header = HEADER.read_text()
    for stat in SinkStat:
        assert f"STAT_{stat.name} = {stat.value}," in header, stat


def test_host_record_dtype_views_raw_bytes():
    raw = bytearray(HOST_RECORD_DTYPE.itemsize * 2)
    rec = np.frombuffer(raw, HOST_RECORD_DTYPE)
    assert rec.shape == (2,) and rec["hops"].shape == (2, 8)


def _slots(recs: np.ndarray, flags: list[int]) -> np.ndarray:
    from ebpf.ringbuf import slot_size
    slot = slot_size(HOST_RECORD_DTYPE)
    raw = np.zeros(len(recs) * slot, np.uint8)
    for i, (r, f) in enumerate(zip(recs, flags)):
        raw[i * slot:i * slot + 4] = np.frombuffer(
            np.uint32(HOST_RECORD_DTYPE.itemsize | f).tobytes(), np.uint8)
        raw[i * slot + 8:i * slot + 8 + HOST_RECORD_DTYPE.itemsize] = \
            np.frombuffer(r.tobytes(), np.uint8)
    return raw


def test_ring_slots_decoded_busy_stops_discard_skipped():
    from ebpf.ringbuf import decode_slots
    recs = np.zeros(5, HOST_RECORD_DTYPE)
    recs["psn"] = [10, 11, 12, 13, 14]
    out, used = decode_slots(_slots(recs, [0, 0x40000000, 0, 0x80000000, 0]),
                             HOST_RECORD_DTYPE)
    assert used == 3 and out["psn"].tolist() == [10, 12]


def test_ring_slot_of_wrong_size_is_an_error():
    from ebpf.errors import EbpfError
    from ebpf.ringbuf import decode_slots, slot_size
    raw = _slots(np.zeros(2, HOST_RECORD_DTYPE), [0, 0])
    raw[slot_size(HOST_RECORD_DTYPE)] = 0x10
    with pytest.raises(EbpfError, match="record 1 of"):
        decode_slots(raw, HOST_RECORD_DTYPE)


def test_setup_check_names_what_is_missing(monkeypatch):
    from ebpf import setup_check
    from ebpf.errors import EbpfSetupError
    monkeypatch.setattr(setup_check.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(setup_check.importlib.util, "find_spec", lambda name: None)
    monkeypatch.setattr(setup_check.platform, "release", lambda: "0.0-none")
    with pytest.raises(EbpfSetupError) as exc:
        setup_check.check_setup()
    msg = str(exc.value)
    assert "root" in msg and "python3-bpfcc" in msg and "linux-headers-0.0-none" in msg


def test_cflags_are_checked_not_pasted():
    from ebpf.errors import ConfigError
    from ebpf.loader import cflags_for
    assert cflags_for({"INT_UDP_PORT": 7777})[1:] == ["-DINT_UDP_PORT=7777"]
    with pytest.raises(ConfigError, match="expected an int"):
        cflags_for({"INT_UDP_PORT": "7777; int x"})
    with pytest.raises(ConfigError, match="upper-case identifier"):
        cflags_for({"A=1 -DB": 1})


# ---- properties (hypothesis) ----------------------------------------------------------
_STD_BITS = [int_md.INS_NODE_ID, int_md.INS_PORTS, int_md.INS_HOP_LATENCY, int_md.INS_QUEUE,
             int_md.INS_INGRESS_TS, int_md.INS_EGRESS_TS, int_md.INS_TX_UTIL]
_DS_BITS = [int_md.DS_TX_BYTES, int_md.DS_QUEUE_BYTES, int_md.DS_LINE_RATE]


def _mask_of(bits):
    return st.lists(st.sampled_from(bits), unique=True).map(lambda xs: sum(xs))


_hops = st.builds(
    HopRecord, node_id=st.integers(0, 2**32 - 1), ingress_port=st.integers(0, 0xFFFF),
    egress_port=st.integers(0, 0xFFFF), hop_latency=st.integers(0, 2**32 - 1),
    queue_id=st.integers(0, 255), queue_occupancy=st.integers(0, 2**24 - 1),
    ingress_ts=st.integers(0, 2**64 - 1), egress_ts=st.integers(0, 2**64 - 1),
    tx_util=st.integers(0, 2**32 - 1), tx_bytes=st.integers(0, 2**32 - 1),
    queue_bytes=st.integers(0, 2**32 - 1), line_rate=st.integers(0, 2**32 - 1))


@settings(max_examples=150, deadline=None)
@given(ins=_mask_of(_STD_BITS), ds=_mask_of(_DS_BITS), hops=st.lists(_hops, max_size=8),
       payload=st.binary(max_size=64), psn=st.integers(0, 2**24 - 1))
def test_property_insert_parse_strip(ins, ds, hops, payload, psn):
    frame = roce_frame(psn=psn, payload=payload)
    pkt = int_md.insert_int(frame, hops, instruction_bitmap=ins, ds_instruction=ds)
    hdr = int_md.parse_int(pkt)
    assert hdr is not None
    if int_md.hop_words(ins, ds):
        assert list(hdr.hops) == [h.masked(ins, ds) for h in hops]
    assert len(pkt) - len(frame) == hdr.int_len == 16 + len(hops) * 4 * int_md.hop_words(ins, ds)
    assert int_md.strip_int(pkt) == frame


def test_run_and_flush_constants_match_the_c_header():
    from ebpf import flush, sink
    header = HEADER.read_text()
    assert f"#define FLUSH_MAGIC {flush.FLUSH_MAGIC:#010X}u".replace("0X", "0x") in header
    assert f"#define FLUSH_MAX_KEYS {flush.FLUSH_MAX_KEYS}\n" in header
    assert f"#define FLUSH_RING_FULL {flush.FLUSH_RING_FULL:#x}\n" in header
    assert f"#define RUN_MAX_PACKETS {sink.RUN_MAX_PACKETS}\n" in header


def test_psn_runs_to_packets_expands_in_order_with_wrap():
    top = (1 << 24) - 2
    idx, psn, t = int_md.psn_runs_to_packets(
        np.array([top, 7, 9]), np.array([4, 1, 3]), np.array([100, 500, 900]),
        np.array([400, 500, 901]))
    assert idx.tolist() == [0, 0, 0, 0, 1, 2, 2, 2]
    assert psn.tolist() == [top, top + 1, 0, 1, 7, 9, 10, 11]
    assert t.tolist() == [100, 200, 300, 400, 500, 900, 900, 901]
