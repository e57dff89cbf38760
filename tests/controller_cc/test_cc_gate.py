"""HPCC commits its reference rate only on fresh telemetry (controller.cc.gate).

Synthetic telemetry for one bottleneck hop with a standing queue: every sample says
"too fast".  Without the gate, each batch that arrives one T after the last commit
commits again on the same queue (compounding decreases); with it, samples taken
before the sender applied the last committed rate only set the rate (fast react)."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import (
    CommitGate,
    GateParams,
    HopSamples,
    HpccEngine,
    HpccParams,
    ParameterError,
    psn_at_or_after,
)

LINE = 10e9
T_S = 20e-6
T_NS = 20_000
PSN_MOD = 1 << 24


class Flow:
    """One flow through one 10G hop with a 40 KB queue, one sample per 1 µs."""

    def __init__(self) -> None:
        self.k = 0

    def batch(self, n: int, arrival_ns: int, psn0: int) -> tuple[HopSamples, np.ndarray]:
        i = np.arange(self.k, self.k + n)
        self.k += n
        hs = HopSamples(flow_idx=np.zeros(n, np.int64), n_hops=np.ones(n, np.int64),
                        arrival_ns=np.full(n, arrival_ns), node_id=np.ones((n, 1), np.uint32),
                        ts_ns=(1_000_000 + i * 1000).astype(np.uint64)[:, None],
                        qlen_bytes=np.full((n, 1), 40_000.0),
                        tx_bytes=(i * 1250).astype(np.uint64)[:, None],   # 10 Gbit/s
                        line_rate_bps=np.full((n, 1), LINE))
        return hs, (psn0 + np.arange(n)) % PSN_MOD


def _engine() -> HpccEngine:
    eng = HpccEngine(n_flows=4, params=HpccParams(base_rtt_s=T_S), clock_ns=lambda: 0)
    eng.start_flows([0], max_rate_bps=LINE)
    return eng


def _run(eng: HpccEngine, gate: CommitGate, hs: HopSamples, psn: np.ndarray):
    st = eng.state
    mask = gate.commit_mask(hs.flow_idx, psn=psn, has_psn=np.ones(psn.size, bool),
                            arrival_ns=hs.arrival_ns, last_commit_ns=st.last_commit_ns,
                            base_rtt_ns=st.base_rtt_ns)
    return mask, eng.update(hs, commit_mask=mask)


def _confirming_gate(**kw: float) -> CommitGate:
    gate = CommitGate(n_flows=4, params=GateParams(**kw))
    gate.confirm([0], [0], [0], [True])       # the agent confirmed something before
    return gate


def test_psn_comparison_wraps() -> None:
    assert psn_at_or_after([5, 4, 0, PSN_MOD - 1], [5, 5, PSN_MOD - 2, 3]).tolist() == [
        True, False, True, False]
    assert psn_at_or_after(2, PSN_MOD - 3)          # just past the wrap
    assert not psn_at_or_after(PSN_MOD // 2 + 10, 5)  # more than half the space: behind


def test_stale_batches_commit_once_and_resume_at_the_applied_psn() -> None:
    eng, gate, flow = _engine(), _confirming_gate(), Flow()
    hs, psn = flow.batch(4, 100_000, 0)             # primes the hop history, then commits
    mask, d = _run(eng, gate, hs, psn)
    assert mask.all() and np.flatnonzero(d.committed).tolist() == [1]   # once, first measured
    rc_after_first = eng.state.rc_bps[0]
    gate.arm([0], [41], 100_000)                    # the committed rate left as seq 41
    assert gate.armed[0]
    # five more batches, each one T later, all from packets sent before the new rate
    rates = []
    for b in range(1, 6):
        hs, psn = flow.batch(8, 100_000 + b * T_NS, 4 + 8 * (b - 1))
        mask, d = _run(eng, gate, hs, psn)
        assert not mask.any() and not d.committed.any()
        rates.append(d.rate_bps[-1])
        if b == 2:   # the confirmation arrives meanwhile: applied from PSN 44 on
            gate.confirm([0], [41], [44], [True])
    assert eng.state.rc_bps[0] == rc_after_first    # Rc held: no compounding
    assert all(r < LINE for r in rates)             # but every sample set the rate
    assert gate.stats.held == 5
    # the batch holding PSN 44 commits, exactly once, at the first fresh sample
    hs, psn = flow.batch(8, 100_000 + 6 * T_NS, 40)
    mask, d = _run(eng, gate, hs, psn)
    assert np.flatnonzero(mask).tolist() == [4, 5, 6, 7] and psn[4] == 44
    assert np.flatnonzero(d.committed).tolist() == [4]
    assert eng.state.rc_bps[0] < rc_after_first
    assert not gate.armed[0] and gate.stats.released_fresh == 1


def test_without_the_gate_the_same_batches_compound() -> None:
    eng, flow = _engine(), Flow()
    commits = 0
    for b in range(6):
        hs, _ = flow.batch(8, 100_000 + b * T_NS, 0)
        commits += int(eng.update(hs).committed.sum())
    assert commits == 6   # once per T of arrival time, whatever the samples saw


def test_applied_psn_across_the_wrap() -> None:
    eng, gate, flow = _engine(), _confirming_gate(), Flow()
    hs, psn = flow.batch(4, 100_000, PSN_MOD - 20)
    _run(eng, gate, hs, psn)
    gate.arm([0], [7], 100_000)
    gate.confirm([0], [7], [PSN_MOD - 2], [True])
    hs, psn = flow.batch(6, 100_000 + T_NS, PSN_MOD - 5)   # ..., 2^24-1, 0: crosses
    mask, d = _run(eng, gate, hs, psn)
    assert psn[d.committed].tolist() == [PSN_MOD - 2] and psn[mask][0] == PSN_MOD - 2
    gate.arm([0], [8], 100_000 + T_NS)
    gate.confirm([0], [8], [3], [True])             # applied after the wrap
    hs, psn = flow.batch(6, 100_000 + 2 * T_NS, PSN_MOD - 2)  # 2^24-2 .. 3
    mask, d = _run(eng, gate, hs, psn)
    assert psn[d.committed].tolist() == [3] and mask.sum() == 1


def test_timeouts_resume_the_time_based_commit() -> None:
    eng, flow = _engine(), Flow()
    gate = _confirming_gate(confirm_timeout_s=1e-3, fresh_timeout_s=5e-3)
    hs, psn = flow.batch(4, 100_000, 0)
    _run(eng, gate, hs, psn)
    gate.arm([0], [1], 100_000)                     # ... and the confirmation is lost
    hs, psn = flow.batch(4, 100_000 + 900_000, 4)   # 0.9 ms: still waiting
    assert not _run(eng, gate, hs, psn)[0].any()
    hs, psn = flow.batch(4, 100_000 + 1_000_000, 8)  # 1 ms: gives up, commits
    mask, d = _run(eng, gate, hs, psn)
    assert mask.all() and d.committed.tolist() == [True, False, False, False]
    assert gate.stats.timeouts_confirm == 1
    # no confirmation came: the flow is not gated again until one does
    assert not gate.confirming[0]
    gate.arm([0], [2], 1_100_000)
    assert not gate.armed[0]
    # a confirmation that never sees fresh telemetry: the second timeout
    gate.confirm([0], [2], [0], [True])
    gate.arm([0], [3], 2_000_000)
    gate.confirm([0], [3], [1_000_000], [True])     # a PSN the samples never reach
    hs, psn = flow.batch(4, 2_000_000 + 4_000_000, 20)
    assert not _run(eng, gate, hs, psn)[0].any()
    hs, psn = flow.batch(4, 2_000_000 + 5_000_000, 24)
    assert _run(eng, gate, hs, psn)[0].any()
    assert gate.stats.timeouts_fresh == 1 and gate.confirming[0]


def test_not_applied_opens_the_gate_and_stops_gating() -> None:
    gate = _confirming_gate()
    gate.arm([0], [9], 0)
    gate.confirm([0], [8], [0], [False])            # an older record: not the one waited for
    assert gate.armed[0]
    gate.confirm([0], [9], [0], [False])            # e.g. UNKNOWN_QP: the rate did not change
    assert not gate.armed[0] and not gate.confirming[0]
    assert gate.stats.released_not_applied == 1


def test_flows_of_agents_that_never_confirm_are_not_gated() -> None:
    eng, flow = _engine(), Flow()
    gate = CommitGate(n_flows=4)
    commits = 0
    for b in range(4):
        hs, psn = flow.batch(8, 100_000 + b * T_NS, 8 * b)
        _, d = _run(eng, gate, hs, psn)
        commits += int(d.committed.sum())
        gate.arm([0], [b], 100_000 + b * T_NS)
    assert commits == 4 and gate.stats.armed == 0


def test_gate_parameters_are_checked() -> None:
    with pytest.raises(ParameterError, match="confirm_timeout_s = 2"):
        GateParams(confirm_timeout_s=2, fresh_timeout_s=1)
    with pytest.raises(ParameterError, match="n_flows = 0"):
        CommitGate(n_flows=0)


def test_thinning_keeps_the_last_sample_of_each_flow_spread_evenly() -> None:
    from common.flow_batches import thin_per_key
    idx = np.array([0] * 10 + [1, 2, 2])
    keep = thin_per_key(idx, 3)
    assert idx[keep].tolist() == [0, 0, 0, 1, 2, 2]
    assert keep.tolist() == [3, 6, 9, 10, 11, 12]          # batch order, last ones kept
    rng = np.random.default_rng(1)
    idx = rng.integers(0, 7, 5000)
    keep = thin_per_key(idx, 16)
    assert np.all(np.diff(keep) > 0)
    for f in range(7):
        mine = np.flatnonzero(idx == f)
        assert np.count_nonzero(idx[keep] == f) == 16 and mine[-1] in keep
    assert thin_per_key(idx, 10_000).size == idx.size
