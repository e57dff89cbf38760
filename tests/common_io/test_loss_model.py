"""common.loss: one loss model for every part (text forms, checks, the sampler), and
common.faults: one list of fault kinds."""
from __future__ import annotations

import random

import pytest

from common.faults import FAULT_KINDS, LINK_FAULT_KINDS, component_type
from common.loss import LossKind, LossModel, LossProcess, LossSpecError
from controller.lossmap import cycles_from_sequence, fit_gilbert_elliott


@pytest.mark.parametrize("text,model", [
    ("none", LossModel.none()), ("0", LossModel.none()),
    ("0.01", LossModel.bernoulli(0.01)), ("bernoulli:0.2", LossModel.bernoulli(0.2)),
    ("ge:0.01,0.3", LossModel.gilbert_elliott(0.01, 0.3)),
    ("gilbert-elliott:0.01,0.3,0.1,0.99", LossModel.gilbert_elliott(0.01, 0.3, 0.1, 0.99)),
    ("1%", LossModel.bernoulli(0.01)), ("0%", LossModel.none()),
    ("ge:1%/10", LossModel.bursty(0.01, 10)), ("ge:0.05/3", LossModel.bursty(0.05, 3)),
    ("ge:1%/10@120us", LossModel.bursty(0.01, 10).clocked(120e-6)),
    ("ge:0.01,0.3@0.5ms", LossModel.gilbert_elliott(0.01, 0.3).clocked(0.5e-3)),
    ("ge:0.01,0.3@1e-4", LossModel.gilbert_elliott(0.01, 0.3).clocked(1e-4)),
])
def test_text_forms(text: str, model: LossModel) -> None:
    assert LossModel.parse(text) == model


@pytest.mark.parametrize("text,why", [
    ("1.5", "bernoulli p=1.5 outside"), ("bernoulli:1", "loses every packet"),
    ("ge:0.1", "needs p,r"), ("ge:0.1,0", "never leaves the bad state"),
    ("lots", "not a number"), ("ge:1%/0.5", "mean_burst_pkts 0.5 must be >= 1"),
    ("ge:x%/3", "not a number"), ("150%", "bernoulli p=1.5 outside"),
    ("ge:1%/10@2s", "slot 2.0 s outside"), ("ge:1%/10@-1ms", "outside 0..1 s"),
    ("1%@1ms", "only applies to a gilbert-elliott chain"), ("none@1ms", "not none"), ("ge:1%/3@fast", "not a number"),
])
def test_bad_text_names_the_problem(text: str, why: str) -> None:
    with pytest.raises(LossSpecError, match=why):
        LossModel.parse(text)


def test_sampler_follows_the_model() -> None:
    m = LossModel.bursty(0.05, 4.0)
    assert m.kind is LossKind.GILBERT_ELLIOTT and m.mean_burst_len == 4.0
    n = 200_000
    proc = LossProcess(m, random.Random(5))
    lost = [proc.lost() for _ in range(n)]
    lo, hi = m.loss_count_interval(n)
    assert lo <= sum(lost) <= hi
    fit = fit_gilbert_elliott(cycles_from_sequence(lost), confidence=0.999)
    assert fit.model.kind is LossKind.GILBERT_ELLIOTT
    assert fit.r.contains(m.r) and abs(fit.model.mean_loss - 0.05) < 0.01
    assert not LossProcess(LossModel.none()).lossy


def test_fault_kinds_and_their_places() -> None:
    assert FAULT_KINDS[:3] == ("gray_loss", "rate_degraded", "link_down")
    assert LINK_FAULT_KINDS == ("gray_loss", "rate_degraded", "link_down", "congestion")
    assert [component_type(k) for k in ("tiny_queue", "slow_receiver", "straggler")] == [
        "port", "host", "rank"]


def test_clocked_chain_text_and_dict() -> None:
    m = LossModel.parse("ge:1%/10@120us")
    assert m.slot_s == pytest.approx(120e-6) and m.mean_burst_len == pytest.approx(10)
    assert m.to_dict()["slot_s"] == m.slot_s and "slot_s" not in LossModel.bursty(0.01).to_dict()
    assert LossModel.bernoulli(0.01).clocked(1e-3) == LossModel.bernoulli(0.01)


@pytest.mark.parametrize("p,r", [(0.01, 0.1), (0.2, 0.05), (0.7, 0.6), (0.0, 0.3)])
def test_n_step_transition_is_the_matrix_power(p: float, r: float) -> None:
    import numpy as np

    m = LossModel.gilbert_elliott(p, r)
    t = np.array([[1 - p, p], [r, 1 - r]])       # rows: from good, from bad
    for n in (1, 2, 5, 37):
        tn = np.linalg.matrix_power(t, n)
        assert m.bad_after(False, n) == pytest.approx(tn[0, 1], abs=1e-12)
        assert m.bad_after(True, n) == pytest.approx(tn[1, 1], abs=1e-12)
    assert m.bad_after(True, 0) == 1.0 and m.bad_after(False, 0) == 0.0


def test_a_clocked_chain_at_one_packet_per_slot_is_the_packet_chain() -> None:
    """Packets one slot apart: the same verdicts, draw for draw, as netem's chain."""
    m = LossModel.bursty(0.05, 10)
    slot = 1e-4
    plain, clocked = LossProcess(m, seed=3), LossProcess(m.clocked(slot), seed=3)
    got = [(plain.lost(), clocked.lost(5.0 + i * slot)) for i in range(20_000)]
    assert all(a == b for a, b in got) and sum(a for a, _ in got) > 500


def test_idle_time_ends_bursts_of_a_clocked_chain() -> None:
    """Packets 100 slots apart on a chain with bursts of 50: nearly independent losses
    (runs of 1/(1-pi) on average) at the same long-run rate; the packet chain keeps its
    bursts of 50 whatever the spacing."""
    m, n, slot = LossModel.bursty(0.2, 50), 40_000, 1e-5
    per_pkt = LossProcess(m, seed=4)
    clocked = LossProcess(m.clocked(slot), seed=4)
    a = [per_pkt.lost(i * 100 * slot) for i in range(n)]
    b = [clocked.lost(i * 100 * slot) for i in range(n)]

    def mean_run(xs: list[bool]) -> float:
        runs = sum(1 for i, x in enumerate(xs) if x and (i == 0 or not xs[i - 1]))
        return sum(xs) / max(1, runs)

    assert mean_run(a) > 25 and mean_run(b) < 1.5
    assert abs(sum(b) / n - 0.2) < 0.015
