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
])
def test_text_forms(text: str, model: LossModel) -> None:
    assert LossModel.parse(text) == model


@pytest.mark.parametrize("text,why", [
    ("1.5", "bernoulli p=1.5 outside"), ("bernoulli:1", "loses every packet"),
    ("ge:0.1", "needs p,r"), ("ge:0.1,0", "never leaves the bad state"),
    ("lots", "not a number"), ("ge:1%/0.5", "mean_burst_pkts 0.5 must be >= 1"),
    ("ge:x%/3", "not a number"), ("150%", "bernoulli p=1.5 outside"),
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
