"""Host-agent batches through the collector into the per-flow loss map."""
from __future__ import annotations

import numpy as np
import pytest

from controller.lossmap.listener import FlowLossListener
from controller.lossmap.stream import FlowLossStream

int_pkg = pytest.importorskip("controller.int")
records_mod = pytest.importorskip("controller.int.records")
fmt_int = pytest.importorskip("formats.int_md")
fmt_batch = pytest.importorskip("formats.agent_batch")


def host_records(sport: int, psns: list[int], t0: int) -> np.ndarray:
    r = np.zeros(len(psns), fmt_int.HOST_RECORD_DTYPE)
    r["capture_ns"] = t0 + np.arange(len(psns)) * 1000
    r["src_ip"], r["dst_ip"] = 0x0A000001, 0x0A000101
    r["src_port"], r["orig_dport"], r["dest_qp"] = sport, 4791, 0x11
    r["psn"] = psns
    r["opcode"] = 0x0A
    return r


def test_agent_batches_give_psn_gap_losses():
    assert records_mod.SOURCE_HOST == 2
    stream = FlowLossStream(n_flows=64, bin_ns=10**6, n_bins=10)
    listener = FlowLossListener(stream=stream)
    col = int_pkg.Collector(int_pkg.CollectorConfig(report_port=0, agent_port=0,
                                                    flow_capacity=64), listeners=[listener])
    top = (1 << 24) - 2
    a = host_records(49152, [top, top + 1, 2, 3, 4], 10_000)          # 0 and 1 lost (wrap)
    b = host_records(49153, [10, 11, 15, 16], 10_000)                  # 12..14 lost
    c = host_records(49152, [3, 5, 8], 20_000)                         # resend 3; 6, 7 lost
    d = [fmt_batch.encode_batch(x, agent_id=7, batch_seq=i) for i, x in enumerate((a, b, c))]
    col.feed_agent_batches(d[:2])
    col.feed_agent_batches(d[2:])
    assert listener.records == 12
    lost = stream.lost_total
    assert sorted(lost[lost > 0].tolist()) == [3.0, 4.0]  # flow b: 3; flow a: 2 + 2
    m = stream.snapshot()
    assert m.lost.sum() == 7 and m.delivered.sum() == 12


def test_reused_slot_starts_a_new_flow():
    from types import SimpleNamespace
    stream = FlowLossStream(n_flows=4, bin_ns=10**6, n_bins=4)
    listener = FlowLossListener(stream=stream)

    def batch(sport: int, psns: list[int]) -> SimpleNamespace:
        s = np.zeros(len(psns), records_mod.REPORT_DTYPE)
        s["source"], s["has_bth"], s["sport"], s["run_psn"] = 2, 1, sport, psns
        s["psn_count"] = 1
        s["arrival_ns"] = 5
        return SimpleNamespace(samples=s)

    listener(batch(1, [100, 101, 103]), np.array([0, 0, 0]))
    assert stream.lost_total[0] == 1
    # the collector gave slot 0 to another flow whose PSNs start elsewhere
    listener(batch(2, [7, 8]), np.array([0, 0]))
    assert stream.lost_total[0] == 0 and stream.snapshot().delivered[0].sum() == 2


# --- host records that cover runs of packets (the sink's aggregation) -----------------
MASK = 0xFFFFFF


def runs_of(psns: list[int], times: list[int], most: int) -> list[list[int]]:
    """The sink's rule: a packet continues its flow's run when its PSN is the next one
    and the run holds fewer than ``most``; else the run closes. [first, count, t0, t1]."""
    runs: list[list[int]] = []
    for p, t in zip(psns, times):
        if runs and p == (runs[-1][0] + runs[-1][1]) & MASK and runs[-1][1] < most:
            runs[-1][1] += 1
            runs[-1][3] = t
        else:
            runs.append([p, 1, t, t])
    return runs


def lin(n: int) -> list[int]:
    """Capture times 1 us apart."""
    return [1_000_000 + 1000 * i for i in range(n)]


def run_records(sport: int, runs: list[list[int]]) -> np.ndarray:
    r = host_records(sport, [x[0] for x in runs], 0)
    r["psn_count"] = [x[1] for x in runs]
    r["run_first_ns"] = [x[2] for x in runs]
    r["run_last_ns"] = [x[3] for x in runs]
    r["sample_psn"] = [(x[0] + x[1] - 1) & MASK for x in runs]
    r["capture_ns"] = r["run_last_ns"]
    return r


def loss_map_of(batches: list[np.ndarray]) -> tuple[FlowLossListener, FlowLossStream]:
    stream = FlowLossStream(n_flows=8, bin_ns=50_000, n_bins=64)
    listener = FlowLossListener(stream=stream)
    col = int_pkg.Collector(int_pkg.CollectorConfig(report_port=0, agent_port=0,
                                                    flow_capacity=8), listeners=[listener])
    col.feed_agent_batches([fmt_batch.encode_batch(b, agent_id=7, batch_seq=i)
                            for i, b in enumerate(batches)])
    return listener, stream


def assert_same_map(psns: list[int], most: int, cut: int) -> None:
    """Runs of at most ``most`` packets, shipped in two batches cut at run ``cut``,
    give the map of one record per packet (times linear, so bins agree too)."""
    times = lin(len(psns))
    per_packet = run_records(49152, runs_of(psns, times, 1))
    runs = run_records(49152, runs_of(psns, times, most))
    cut = min(cut, len(runs))
    l1, s1 = loss_map_of([per_packet])
    l2, s2 = loss_map_of([runs[:cut], runs[cut:]])
    assert l1.packets == l2.packets == len(psns)
    np.testing.assert_array_equal(s1.lost_total, s2.lost_total)
    m1, m2 = s1.snapshot(), s2.snapshot()
    np.testing.assert_array_equal(m1.lost, m2.lost)
    np.testing.assert_array_equal(m1.delivered, m2.delivered)


def test_gap_across_a_record_boundary_counts_once():
    # 16 in a row close a run at 15; 16, 17 lost: the gap opens the next record
    psns = list(range(16)) + [18, 19, 20]
    assert [r[:2] for r in runs_of(psns, lin(len(psns)), 16)] == [[0, 16], [18, 3]]
    assert_same_map(psns, 16, cut=1)
    _, s = loss_map_of([run_records(49152, runs_of(psns, lin(len(psns)), 16))])
    assert s.lost_total.sum() == 2 and s.snapshot().delivered.sum() == 19


def test_reordered_and_repeated_packets_reveal_nothing():
    psns = [0, 1, 2, 5, 6, 3, 4, 7, 7, 8, 9, 12, 10, 11, 13]
    assert_same_map(psns, 4, cut=2)
    _, s = loss_map_of([run_records(49152, runs_of(psns, lin(len(psns)), 4))])
    assert s.lost_total.sum() == 4  # 3, 4 and 10, 11 skipped when 5 and 12 came


def test_psn_wraps_inside_a_run():
    top = MASK - 5
    psns = [(top + i) & MASK for i in range(12)] + [(top + 14 + i) & MASK for i in range(3)]
    runs = runs_of(psns, lin(len(psns)), 16)
    assert runs[0][:2] == [top, 12]  # one run across 2^24
    assert_same_map(psns, 16, cut=1)
    _, s = loss_map_of([run_records(49152, runs)])
    assert s.lost_total.sum() == 2


def test_flow_idle_then_resumed():
    # the sink closes the run when the flow resumes (or the agent flushed it meanwhile)
    times = [1_000_000 + 1000 * i for i in range(5)] + [2_500_000 + 1000 * i for i in range(5)]
    runs = [[0, 5, times[0], times[4]], [5, 5, times[5], times[9]]]
    _, s = loss_map_of([run_records(49152, runs)])
    m = s.snapshot()
    assert s.lost_total.sum() == 0 and m.delivered.sum() == 10
    assert m.delivered[:, m.bins.index(np.array([times[0]]))[0]].sum() == 5


@pytest.mark.parametrize("most", [2, 3, 16, 1000])
def test_runs_give_the_per_packet_map(most):
    hyp = pytest.importorskip("hypothesis")
    st = pytest.importorskip("hypothesis.strategies")

    @hyp.settings(max_examples=60, deadline=None)
    @hyp.given(steps=st.lists(st.sampled_from([1, 1, 1, 1, 2, 3, 0, -1, -3]), min_size=1,
                              max_size=80),
               start=st.sampled_from([0, 5, MASK - 20]), cut=st.integers(0, 40))
    def check(steps: list[int], start: int, cut: int) -> None:
        psns, p = [], start
        for s in steps:
            p = (p + s) & MASK
            psns.append(p)
        assert_same_map(psns, most, cut)

    check()
