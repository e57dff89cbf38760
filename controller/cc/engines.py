"""The controller's rate engines by algorithm name (names from :mod:`traffic.cc.registry`).

The registry says which algorithms run in the controller (``runs_in="controller"``);
this table builds each one's engine for the collector's flow table.  A controller
algorithm is its engine module, its registry line and its line here.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.cc.errors import ParameterError
from controller.cc.hpcc import HpccEngine, HpccParams
from controller.cc.telemetry import V1MODEL_TS_MODULUS_NS
from traffic.cc import registry as cc_registry
from traffic.cc.base import RateEngine
from traffic.errors import ConfigError

__all__ = ["ENGINES", "make_engine"]

# (n_flows, base RTT lower bound) -> a traffic.cc.base.RateEngine
EngineFactory = Callable[[int, float], Any]

ENGINES: dict[str, EngineFactory] = {
    "hpcc": lambda n_flows, base_rtt_s: HpccEngine(
        n_flows=n_flows, params=HpccParams(base_rtt_s=base_rtt_s,
                                           ts_modulus_ns=V1MODEL_TS_MODULUS_NS)),
}


def make_engine(name: str, *, n_flows: int, base_rtt_s: float) -> Any:
    """The engine (a :class:`~traffic.cc.base.RateEngine`) of the controller algorithm
    ``name``; a clear error otherwise."""
    try:
        algo = cc_registry.get(name, ("controller",))
    except ConfigError as e:
        raise ParameterError(str(e)) from None
    factory = ENGINES.get(algo.name)
    if factory is None:
        raise ParameterError(f"congestion control {name!r}: registered to run in the "
                             "controller, but controller.cc.engines has no engine for it")
    engine = factory(n_flows, base_rtt_s)
    assert isinstance(engine, RateEngine), f"{name}: {type(engine).__name__} is no RateEngine"
    return engine
