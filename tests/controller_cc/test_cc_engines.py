"""The controller's rate engines come from the congestion-control registry's names."""
from __future__ import annotations

import pytest

from controller.cc import HpccEngine
from controller.cc.engines import ENGINES, make_engine
from controller.cc.errors import ParameterError
from controller.runner import RunConfig, RunError
from traffic.cc import registry
from traffic.cc.base import RateEngine


def test_every_controller_algorithm_has_an_engine() -> None:
    assert set(registry.names(("controller",))) == set(ENGINES) == {"hpcc"}
    eng = make_engine("hpcc", n_flows=8, base_rtt_s=20e-6)
    assert isinstance(eng, HpccEngine) and isinstance(eng, RateEngine)
    assert eng.params.base_rtt_s == 20e-6 and eng.n_flows == 8


def test_sender_algorithms_are_no_controller_choice() -> None:
    with pytest.raises(ParameterError, match="'dcqcn' unknown; choose one of hpcc"):
        make_engine("dcqcn", n_flows=8, base_rtt_s=20e-6)
    with pytest.raises(RunError, match="--cc: congestion control 'hpcc-sender' unknown"):
        RunConfig(topology="t.yaml", cc="hpcc-sender")
    assert RunConfig(topology="t.yaml").cc == "hpcc"
