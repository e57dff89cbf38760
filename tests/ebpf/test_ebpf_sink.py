"""The tc ingress INT sink with real packets through a veth into a namespace."""
from __future__ import annotations

import ipaddress
import struct
from collections.abc import Iterator

import numpy as np
import pytest

from ebpf.records import SinkStat
from ebpf.sink import IntSink, SinkConfig
from formats import int_md, roce
from formats.int_md import HopRecord

pytestmark = [pytest.mark.root, pytest.mark.bpf]

BITMAPS = [
    (int_md.HPCC_INSTRUCTION_BITMAP, int_md.HPCC_DS_INSTRUCTION),
    (int_md.SUPPORTED_INSTRUCTIONS, int_md.SUPPORTED_DS_INSTRUCTIONS),
    (int_md.INS_NODE_ID, 0),
    (int_md.INS_PORTS | int_md.INS_HOP_LATENCY | int_md.INS_INGRESS_TS, 0),
    (int_md.INS_QUEUE | int_md.INS_TX_UTIL, int_md.DS_LINE_RATE),
]


@pytest.fixture(scope="module")
def sink(pair) -> Iterator[IntSink]:
    # a record per packet, so each one's sample can be checked (runs: test_ebpf_sink_runs)
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=SinkConfig(run_packets=1)) as s:
        yield s


@pytest.fixture(autouse=True)
def _clean(pair, sink):
    pair.drain()
    sink.read()
    yield


def frame(pair, *, psn: int, qp: int = 0x10, sport: int = 50000, payload: bytes = b"",
          opcode: int = roce.Opcode.SEND_ONLY) -> bytes:
    return roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                            dst=pair.h2.ip, sport=sport, opcode=opcode, dest_qp=qp, psn=psn,
                            payload=payload or bytes(range(64)), tos=0x02)


def hop(i: int, seed: int) -> HopRecord:
    return HopRecord(node_id=0x1000 * seed + i + 1, ingress_port=i + 1, egress_port=2 * i + 3,
                     hop_latency=7 * i + seed, queue_id=i % 8, queue_occupancy=0xABCDE + i,
                     ingress_ts=0x1_0000_0000 * (i + 1) + seed, egress_ts=0x2_0000_0001 + i,
                     tx_util=99 + i, tx_bytes=0xFFFFFF00 + i, queue_bytes=1500 * i + seed,
                     line_rate=100_000 - i)


def stats_delta(sink, before, *, other: bool = False):
    """Counter changes; OTHER only on request (IPv6 neighbour discovery lands there)."""
    after = sink.stats()
    return {k: after[k] - before[k] for k in after
            if after[k] != before[k] and (other or k != SinkStat.OTHER)}


@pytest.mark.parametrize("bitmaps", BITMAPS, ids=[f"{a:04x}-{b:04x}" for a, b in BITMAPS])
def test_records_and_restored_packets(pair, sink, bitmaps):
    ins, ds = bitmaps
    before = sink.stats()
    sent, originals, expected = [], [], []
    for n in range(1, 9):
        orig = frame(pair, psn=100 + n, qp=0x200 + n, sport=40000 + n)
        hops = [hop(i, n) for i in range(n)]
        sent.append(int_md.insert_int(orig, hops, instruction_bitmap=ins, ds_instruction=ds,
                                      ds_flags=0x0102, e=1 if n == 8 else 0))
        originals.append(orig)
        expected.append([h.masked(ins, ds) for h in hops])
    pair.send(sent)
    raw = pair.recv_raw(8)
    udp = pair.recv_udp(8)
    recs = sink.read(timeout_s=1.0)
    assert stats_delta(sink, before) == {SinkStat.INT_STRIPPED: 8}
    # what the stack delivered is exactly what the source sent
    assert raw == [o[14:] for o in originals]
    assert udp == [o[42:] for o in originals]
    assert all(roce.verify_icrc(o[14:42], u) for o, u in zip(originals, udp))
    assert len(recs) == 8
    for n, (rec, exp) in enumerate(zip(recs, expected), start=1):
        assert ipaddress.ip_address(int(rec["src_ip"])) == ipaddress.ip_address(pair.h1.ip)
        assert ipaddress.ip_address(int(rec["dst_ip"])) == ipaddress.ip_address(pair.h2.ip)
        assert rec["src_port"] == 40000 + n and rec["orig_dport"] == 4791
        assert rec["dest_qp"] == 0x200 + n and rec["psn"] == 100 + n
        assert rec["psn_count"] == 1 and rec["sample_psn"] == 100 + n
        assert 0 < rec["run_first_ns"] == rec["run_last_ns"]
        assert rec["opcode"] == roce.Opcode.SEND_ONLY and rec["ip_tos"] == 0x02
        assert rec["hop_count"] == n and rec["remaining_hop_count"] == 8 - n
        assert rec["instruction_bitmap"] == ins and rec["ds_instruction"] == ds
        assert rec["ds_id"] == int_md.INT_DS_ID_HPCC and rec["ds_flags"] == 0x0102
        assert rec["hop_ml"] == int_md.hop_words(ins, ds)
        assert rec["md_flags"] == (2 if n == 8 else 0)
        assert rec["ip_total_len"] == len(originals[n - 1]) - 14
        assert rec["capture_ns"] > 0
        np.testing.assert_array_equal(rec["hops"], int_md.hops_to_array(exp))


def test_non_int_traffic_untouched(pair, sink):
    before = sink.stats()
    plain_udp = bytearray(frame(pair, psn=1))
    struct.pack_into("!H", plain_udp, 36, 5000)        # UDP to another port
    roce_plain = frame(pair, psn=5, qp=0x77)
    pair.send([bytes(plain_udp), roce_plain])
    assert pair.recv_raw(2) == [bytes(plain_udp[14:]), roce_plain[14:]]
    assert pair.recv_udp(1) == [roce_plain[42:]]
    assert sink.read(timeout_s=0.2).size == 0
    assert stats_delta(sink, before) == {SinkStat.ROCE_PLAIN: 1}
    assert stats_delta(sink, before, other=True)[SinkStat.OTHER] >= 1


def flow_of(sink, qp: int):
    rows = [r for r in sink.flows() if r["key"]["dest_qp"] == qp]
    assert len(rows) == 1
    return rows[0]


@pytest.mark.parametrize("with_int", [True, False])
def test_psn_gaps_and_reordering_exact(pair, sink, with_int):
    qp = 0x3000 + with_int
    psns = [0, 1, 2, 5, 6, 4, 7, 10, 10, 11, 12]
    originals = [frame(pair, psn=p, qp=qp, sport=45000) for p in psns]
    frames = originals
    if with_int:
        frames = [int_md.insert_int(f, [hop(0, 1), hop(1, 1)]) for f in originals]
    pair.send(frames)
    assert len(pair.recv_udp(len(frames))) == len(frames)
    row = flow_of(sink, qp)
    st, key = row["stats"], row["key"]
    assert key["src_port"] == 45000
    assert st["packets"] == len(psns)
    assert st["bytes"] == sum(len(f) - 14 for f in originals)   # IPv4 length as sent
    assert st["int_packets"] == (len(psns) if with_int else 0)
    assert st["lost_packets"] == 4      # 3, 4 and 8, 9 skipped when 5 and 10 came
    assert st["loss_events"] == 2
    assert st["last_gap"] == 2
    assert st["out_of_order"] == 2      # 4 late, 10 repeated
    assert st["highest_psn"] == 12
    if with_int:
        assert st["last_hop_count"] == 2
        assert st["path_signature"] == int_md.path_signature([hop(0, 1).node_id,
                                                               hop(1, 1).node_id])


def test_psn_wraps_at_24_bits(pair, sink):
    qp = 0x3100
    psns = [0xFFFFFD, 0xFFFFFE, 0xFFFFFF, 0, 2, 1]
    pair.send([frame(pair, psn=p, qp=qp) for p in psns])
    assert len(pair.recv_udp(len(psns))) == len(psns)
    st = flow_of(sink, qp)["stats"]
    assert (st["lost_packets"], st["loss_events"], st["out_of_order"], st["highest_psn"]) == \
        (1, 1, 1, 2)


# ---- malformed INT: counted per reason, passed up byte for byte unmodified ----------
def _raw_int(orig: bytes, shim: bytes, md: bytes, stack: bytes) -> bytes:
    """INT packet from raw pieces, lengths and checksum fixed like a source would."""
    out = bytearray(orig[:42])
    struct.pack_into("!H", out, 36, int_md.INT_UDP_PORT)
    out += shim + md + stack + orig[42:]
    delta = len(shim) + len(md) + len(stack)
    struct.pack_into("!H", out, 16, struct.unpack_from("!H", out, 16)[0] + delta)
    struct.pack_into("!H", out, 38, struct.unpack_from("!H", out, 38)[0] + delta)
    struct.pack_into("!H", out, 24, 0)
    struct.pack_into("!H", out, 24, roce.ipv4_checksum(bytes(out[14:34])))
    return bytes(out)


def _headers_only(orig: bytes) -> bytes:
    """Ethernet/IPv4/UDP of ``orig`` with an empty UDP payload."""
    out = bytearray(orig[:42])
    struct.pack_into("!H", out, 16, 28)
    struct.pack_into("!H", out, 38, 8)
    struct.pack_into("!H", out, 24, 0)
    struct.pack_into("!H", out, 24, roce.ipv4_checksum(bytes(out[14:34])))
    return bytes(out)


def _md(ml: int = 1, ins: int = int_md.INS_NODE_ID, ds: int = 0, ver: int = 2) -> bytes:
    return struct.pack("!IHHHH", ver << 28 | ml << 8 | 4, ins, int_md.INT_DS_ID_HPCC, ds, 0)


def _shim(words: int, t: int = 1, npt: int = 1) -> bytes:
    return struct.pack("!BBH", t << 4 | npt << 2, words, 4791)


def _malformed(pair) -> list[tuple[SinkStat, bytes]]:
    o = frame(pair, psn=9, qp=0x4000)
    nine = struct.pack("!9I", *range(1, 10))
    ip_opts = bytearray(int_md.insert_int(o, [hop(0, 1)]))
    ip_opts[14] = 0x46                                  # IHL 6 (options follow)
    ip_opts = ip_opts[:34] + b"\x01\x01\x01\x00" + ip_opts[34:]
    struct.pack_into("!H", ip_opts, 16, struct.unpack_from("!H", ip_opts, 16)[0] + 4)
    struct.pack_into("!H", ip_opts, 24, 0)
    struct.pack_into("!H", ip_opts, 24, roce.ipv4_checksum(bytes(ip_opts[14:38])))
    return [
        (SinkStat.BAD_SHORT, _raw_int(_headers_only(o), b"", b"", b"\x10\x05\x12\xb7")),
        (SinkStat.BAD_SHIM, _raw_int(o, _shim(4, t=2), _md(), b"\0" * 4)),
        (SinkStat.BAD_SHIM, _raw_int(o, _shim(4, npt=2), _md(), b"\0" * 4)),
        (SinkStat.BAD_VERSION, _raw_int(o, _shim(4), _md(ver=1), b"\0" * 4)),
        (SinkStat.BAD_LENGTH, _raw_int(o, _shim(200), _md(), b"\0" * 4)),
        (SinkStat.BAD_LENGTH, _raw_int(o, _shim(2), _md(), b"")),
        (SinkStat.BAD_HOP_ML, int_md.insert_int(o, [hop(0, 1)], hop_ml=5)),
        # 20 B of stack is not a whole number of 8 B hops
        (SinkStat.BAD_HOP_ML, _raw_int(o, _shim(3 + 5), _md(ml=2, ins=0xC000), b"\0" * 20)),
        (SinkStat.BAD_TOO_MANY, _raw_int(o, _shim(3 + 9), _md(), nine)),
        (SinkStat.BAD_BITMAP, _raw_int(o, _shim(4), _md(ins=0x8200), b"\0" * 4)),
        (SinkStat.BAD_BITMAP, _raw_int(o, _shim(4), _md(ins=0x8000, ds=0x1000), b"\0" * 4)),
        (SinkStat.BAD_IP, bytes(ip_opts)),
    ]


def test_malformed_counted_and_passed_unmodified(pair, sink):
    cases = _malformed(pair)
    for reason, pkt in cases:
        before = sink.stats()
        pair.send([pkt])
        got = pair.recv_raw(1)
        assert got == [pkt[14:]], reason
        assert stats_delta(sink, before) == {reason: 1}, reason
    assert sink.read(timeout_s=0.1).size == 0
    assert pair.recv_udp(1, timeout_s=0.1) == []


def test_malformed_dropped_when_configured(pair):
    cfg = SinkConfig(malformed_drop=True, prio=15)
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=cfg) as s2:
        pair.drain()
        reason, pkt = _malformed(pair)[3]
        pair.send([pkt])
        assert pair.recv_raw(1, timeout_s=0.3) == []
        st = s2.stats()
        assert st[reason] == 1 and st[SinkStat.MALFORMED_DROPPED] == 1


def test_ring_buffer_overflow_counted_packets_still_stripped(pair):
    cfg = SinkConfig(ringbuf_pages=1, prio=16, run_packets=1)  # 4096 B: 7 records of 528 B
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=cfg) as s2:
        pair.drain()
        orig = frame(pair, psn=1, qp=0x5000)
        pair.send([int_md.insert_int(orig, [hop(0, 2)])] * 20)
        assert pair.recv_udp(20) == [orig[42:]] * 20
        st = s2.stats()
        got = s2.read()
        assert st[SinkStat.INT_STRIPPED] == 20
        assert got.size + st[SinkStat.RINGBUF_FULL] == 20 and got.size >= 7


def test_random_header_damage_kernel_agrees_with_reference(pair, sink):
    """Bytes of shim + MD header changed at random: the sink strips exactly when the
    Python reference accepts the packet (then to the same bytes), else leaves it alone."""
    import random
    rng = random.Random(5)
    hops = [hop(i, 3) for i in range(3)]
    good = [int_md.insert_int(frame(pair, psn=i, qp=0x4100), hops,
                              instruction_bitmap=ins, ds_instruction=ds)
            for i, (ins, ds) in enumerate(BITMAPS)]
    sent, expect, valid = [], [], 0
    for k in range(400):
        pkt = bytearray(rng.choice(good))
        for _ in range(rng.randint(1, 2)):
            pos = 42 + rng.randrange(16)
            if rng.random() < 0.5:
                pkt[pos] ^= 1 << rng.randrange(8)
            else:
                pkt[pos] = rng.randrange(256)
        pkt = bytes(pkt)
        try:
            ref = int_md.strip_int(pkt)
            valid += 1
        except int_md.IntFormatError:
            ref = pkt
        sent.append(pkt)
        expect.append(ref[14:])
    got = []
    for i in range(0, len(sent), 100):
        pair.send(sent[i:i + 100])
        got += pair.recv_raw(len(sent[i:i + 100]), timeout_s=2)
    sink.read(timeout_s=0.2)
    assert len(got) == len(sent)
    mismatches = [i for i, (g, e) in enumerate(zip(got, expect)) if g != e]
    assert mismatches == [], [sent[i][42:58].hex() for i in mismatches[:5]]
    assert 20 < valid < 380          # both kinds were exercised


def test_attach_to_missing_interface_names_it(pair):
    from common.kernel.errors import AttachError
    sink = IntSink("tebnosuchif0", netns=pair.h2.name)
    with pytest.raises(AttachError, match=f"tebnosuchif0 in namespace {pair.h2.name} not found"):
        sink.attach()
    sink.close()                                      # nothing left to release: no error
    with pytest.raises(AttachError, match="namespace 'tebnosuchns' not found"):
        IntSink("lo", netns="tebnosuchns").attach()


def test_flows_read_in_batches_match_a_key_walk(pair, sink, monkeypatch):
    from ebpf import maps
    from ebpf.records import FLOW_KEY_DTYPE, FLOW_STATS_DTYPE
    sink.clear_flows()
    pair.send([frame(pair, psn=1, qp=0x900, sport=20000 + i) for i in range(300)])
    assert len(pair.recv_udp(300)) == 300
    table = sink._need()[b"flows"]
    walked_k, walked_v = maps._walk(table, FLOW_KEY_DTYPE, FLOW_STATS_DTYPE)
    monkeypatch.setattr(maps, "_walk", lambda *a: pytest.fail("batch lookup not used"))
    keys, values = maps.lookup_all(table, FLOW_KEY_DTYPE, FLOW_STATS_DTYPE, chunk=64)
    assert len(keys) == 300
    order, worder = np.argsort(keys["src_port"]), np.argsort(walked_k["src_port"])
    assert (keys[order] == walked_k[worder]).all()          # field by field
    assert (values[order] == walked_v[worder]).all()
