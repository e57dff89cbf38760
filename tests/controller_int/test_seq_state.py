"""Sequence accounting and hop/flow tables."""
from __future__ import annotations

import numpy as np
import pytest

from controller.int.decode import ReportDecoder
from controller.int.errors import ConfigError
from controller.int.seq import SeqTracker
from controller.int.state import FlowTable, HopTable
from controller.int.synth import Hop, build_hpcc_report

SEQ_MOD = 1 << 22


def _upd(t: SeqTracker, node: int, seqs: list[int]) -> None:
    n = len(seqs)
    t.update(np.full(n, node, np.uint32), np.zeros(n, np.uint32), np.array(seqs, np.uint32) % SEQ_MOD)


def test_gaps_reorder_duplicates_and_wrap() -> None:
    t = SeqTracker()
    _upd(t, 1, [10, 11, 14, 12, 13, 15])  # 12, 13 late: nothing lost
    _upd(t, 2, [SEQ_MOD - 3, SEQ_MOD - 2, 1, 2])  # wrap, 0 and SEQ_MOD-1 lost
    _upd(t, 1, [20, 20])  # 16..19 lost, one duplicate
    s1 = next(s for s in t.switches.values() if s.node_id == 1)
    s2 = next(s for s in t.switches.values() if s.node_id == 2)
    assert (s1.lost, s1.late, s1.duplicates, s1.received) == (4, 2, 1, 8)
    assert (s2.lost, s2.late, s2.expected) == (2, 0, 6)


def _batch(i: int, tx: int, qp: int = 5, nodes: tuple[int, ...] = (1, 2, 3)) -> bytes:
    hops = [Hop(node_id=n, egress_port=n + 10, queue_pkts=i, egress_ts_us=1000 * i,
                tx_bytes=tx % (1 << 32), queue_bytes=100 * i, line_rate_mbps=10000,
                hop_latency_us=i) for n in nodes]
    return build_hpcc_report(node_id=9, seq=i, hops=hops, dest_qp=qp, psn=i,
                             ins_bitmap=0xF400)


def _ingest(ht: HopTable, ft: FlowTable, ds: list[bytes], t: int) -> None:
    b = ReportDecoder().decode(ds, t)
    slots = ht.update(b.hops, b.samples["arrival_ns"][b.hops["sample"]])
    ft.update(b.samples, b.hops, slots)


def test_tx_rate_across_wraparound_and_ring_bound() -> None:
    ht, ft = HopTable(capacity=16, depth=4), FlowTable(capacity=4)
    start = (1 << 32) - 3000
    # 1250 bytes per 1000 us = 10 Mbit/s, crossing 2^32; split over two batches
    ds = [_batch(i, start + 1250 * i) for i in range(10)]
    _ingest(ht, ft, ds[:6], 1)
    _ingest(ht, ft, ds[6:], 2)
    snap = ht.snapshot()
    assert len(snap.slot) == 3
    assert np.allclose(snap.tx_rate_bps, 10e6)
    assert snap.samples.tolist() == [10, 10, 10]
    assert snap.hop_latency_ns.tolist() == [9000] * 3
    hist = ht.history(int(snap.slot[0]))
    assert hist["egress_ts_us"].tolist() == [6000, 7000, 8000, 9000]  # bounded, oldest first
    assert np.allclose(hist["tx_rate_bps"], 10e6)


def test_flow_path_change_and_ageing() -> None:
    ht, ft = HopTable(), FlowTable(capacity=8, ttl_ns=1000)
    _ingest(ht, ft, [_batch(1, 0, qp=1), _batch(1, 0, qp=2)], 100)
    _ingest(ht, ft, [_batch(2, 10, qp=1, nodes=(1, 4, 3))], 600)
    f = ft.snapshot()
    by_qp = {int(q): i for i, q in enumerate(f.dest_qp)}
    i1 = by_qp[1]
    assert f.path_node[i1, :3].tolist() == [1, 4, 3]
    assert f.path_changes[i1] == 1 and f.samples[i1] == 2 and f.last_psn[i1] == 2
    hs = ht.snapshot()
    node_of_slot = dict(zip(hs.slot.tolist(), hs.node_id.tolist()))
    assert [node_of_slot[s] for s in f.path_slot[i1, :3]] == [1, 4, 3]
    assert (f.path_slot[i1, 3:] == -1).all()
    assert ft.expire(1400) == 1  # qp 2 idle since 100
    assert len(ft) == 1 and ft.snapshot().dest_qp.tolist() == [1]


def test_capacity_evicts_least_recent() -> None:
    ht, ft = HopTable(capacity=3), FlowTable(capacity=2)
    for i, qp in enumerate([1, 2, 3]):
        _ingest(ht, ft, [_batch(i, 0, qp=qp, nodes=(i + 1,))], 10 * (i + 1))
    assert sorted(ft.snapshot().dest_qp.tolist()) == [2, 3]
    assert len(ht) == 3


def test_bad_sizes_are_refused_with_names() -> None:
    with pytest.raises(ConfigError, match="HopTable.depth=0"):
        HopTable(depth=0)
    with pytest.raises(ConfigError, match="FlowTable.capacity"):
        FlowTable(capacity=0)


def test_late_sample_does_not_replace_newer_state() -> None:
    ht, ft = HopTable(capacity=8, depth=8), FlowTable()
    _ingest(ht, ft, [_batch(5, 5 * 1250)], 1)
    _ingest(ht, ft, [_batch(3, 3 * 1250)], 2)  # older egress timestamp arrives late
    s = ht.snapshot()
    assert s.egress_ts_us.tolist() == [5000] * 3 and s.qlen_bytes.tolist() == [500] * 3
    _ingest(ht, ft, [_batch(6, 6 * 1250)], 3)
    assert np.allclose(ht.snapshot().tx_rate_bps, 10e6)  # from sample 5, not the late 3
    assert ht.snapshot().samples.tolist() == [3] * 3


def test_flow_history_ring() -> None:
    ht, ft = HopTable(), FlowTable(capacity=4, depth=3)
    _ingest(ht, ft, [_batch(i, 0, qp=1) for i in range(1, 5)], 7)
    _ingest(ht, ft, [_batch(5, 0, qp=1), _batch(5, 0, qp=2)], 8)
    f = ft.snapshot()
    s1 = int(f.slot[f.dest_qp == 1][0])
    h = ft.history(s1)
    assert h["psn"].tolist() == [3, 4, 5] and h["arrival_ns"].tolist() == [7, 7, 8]
    assert h["max_qlen_bytes"].tolist() == [300, 400, 500]  # queue_bytes = 100 * i on every hop
    assert h["path_latency_ns"].tolist() == [9000, 12000, 15000]  # 3 hops x i us
    assert ft.history(int(f.slot[f.dest_qp == 2][0]))["psn"].tolist() == [5]


def test_c_run_equals_numpy_run() -> None:
    """reports.c's per-switch run (seq_run) and the numpy passes count alike: random
    orders with losses, late and duplicate reports, wraps, several switches."""
    from controller.int import native_reports
    from formats.telemetry_report import SEQ_MOD
    if not native_reports.available():
        pytest.skip("gcc missing: no reports.c to compare")
    rng = np.random.default_rng(4)
    a, b = SeqTracker(), SeqTracker()
    b.native = False
    assert a.native
    base = int(rng.integers(0, SEQ_MOD))
    for _ in range(40):
        n = int(rng.integers(1, 300))
        seq = (base + np.arange(n) + rng.integers(-20, 20, n)) % SEQ_MOD
        base = (base + n) % SEQ_MOD
        node = rng.integers(1, 4, n).astype(np.uint32)
        hw = rng.integers(0, 2, n).astype(np.uint32)
        a.update(node, hw, seq.astype(np.uint32))
        b.update(node, hw, seq.astype(np.uint32))
        assert a.switches == b.switches
