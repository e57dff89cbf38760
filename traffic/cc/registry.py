"""The congestion-control algorithms by name: the one list every choice is read from.

The experiment spec (``cc:``), ``python -m traffic --cc``, ``python -m controller run
--cc``, the test bed (which needs INT echo, ECN marks or controller feedback) and the
requester (which sender algorithm a QP runs) all look names up here.  Adding an
algorithm: its module (a :class:`~traffic.cc.base.SenderCc`, or a controller
:class:`~traffic.cc.base.RateEngine`), its tests, and one :func:`register` line below.

Algorithms kept outside the tree (a test's, an experiment's) register themselves when
imported; the modules named in ``$TRAFFIC_CC_MODULES`` (comma-separated) are imported
on the first look-up, so that ``python -m traffic`` processes started by a test or the
test bed know them too.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from traffic.cc.base import SenderCc
from traffic.cc.dcqcn import DcqcnSender
from traffic.cc.hpcc import HpccSender, cli_args
from traffic.errors import ConfigError

__all__ = ["PLUGIN_ENV", "CcAlgorithm", "get", "names", "parse_sender", "register",
           "unregister"]

PLUGIN_ENV = "TRAFFIC_CC_MODULES"

Where = Literal["none", "sender", "controller"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CcAlgorithm:
    """One algorithm: where it runs and what the network must give it."""

    name: str
    summary: str
    runs_in: Where
    sender: Callable[[Any, float], SenderCc] | None = None
    """(QpConfig, now_s) -> the QP's algorithm; only with ``runs_in="sender"``."""
    needs_int_echo: bool = False   # receivers' sinks echo INT hops in their ACKs
    needs_ecn: bool = False        # switches mark ECN, receivers answer with CNPs
    needs_int: bool = False        # P4 switches add INT (echoed, or reported to the controller)
    settings_argv: Callable[[Any], list[str]] | None = None
    """Its settings (as the experiment spec holds them) as ``python -m traffic`` flags."""

    def __post_init__(self) -> None:
        if (self.runs_in == "sender") != (self.sender is not None):
            raise ConfigError(f"congestion control {self.name!r}: a sender factory goes "
                              "with runs_in='sender', and only there")

    @property
    def controller_feedback(self) -> bool:
        """The controller computes rates and the host agents relay them."""
        return self.runs_in == "controller"


_ALGORITHMS: dict[str, CcAlgorithm] = {}
_plugins_loaded = False


def register(algo: CcAlgorithm, *, replace: bool = False) -> CcAlgorithm:
    """Add ``algo`` (a name taken already is an error unless ``replace``)."""
    if algo.name in _ALGORITHMS and not replace:
        raise ConfigError(f"congestion control {algo.name!r} is registered already")
    _ALGORITHMS[algo.name] = algo
    return algo


def unregister(name: str) -> None:
    _ALGORITHMS.pop(name, None)


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for mod in filter(None, (m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(","))):
        try:
            importlib.import_module(mod)
        except ImportError as exc:
            raise ConfigError(f"${PLUGIN_ENV}: cannot import {mod!r}: {exc}") from None


def names(runs_in: tuple[Where, ...] = ("none", "sender", "controller")) -> tuple[str, ...]:
    """Registered names (of algorithms running in one of ``runs_in``), in order."""
    _load_plugins()
    return tuple(n for n, a in _ALGORITHMS.items() if a.runs_in in runs_in)


def get(name: str, runs_in: tuple[Where, ...] = ("none", "sender", "controller")
        ) -> CcAlgorithm:
    """The algorithm called ``name``; a clear error naming the choices otherwise."""
    _load_plugins()
    algo = _ALGORITHMS.get(str(name).lower())
    if algo is None or algo.runs_in not in runs_in:
        raise ConfigError(f"congestion control {name!r} unknown; choose one of "
                          f"{', '.join(names(runs_in))}")
    return algo


def parse_sender(text: str) -> str:
    """argparse ``type=`` of a sender's ``--cc``: a name that runs in the sender (or none)."""
    return get(text, ("none", "sender")).name


register(CcAlgorithm(name="none", runs_in="none",
                     summary="the configured rate, changed only by controller feedback"))
register(CcAlgorithm(name="dcqcn", runs_in="sender", needs_ecn=True,
                     summary="DCQCN's reaction point on the QP's CNPs (traffic.cc.dcqcn)",
                     sender=lambda cfg, now: DcqcnSender(cfg.rate_bps, cfg.dcqcn,
                                                         mtu=cfg.mtu, now_s=now)))
register(CcAlgorithm(name="hpcc", runs_in="controller", needs_int=True,
                     summary="HPCC computed by the controller from INT telemetry, "
                             "rates relayed by the host agents (controller.cc)"))
register(CcAlgorithm(name="hpcc-sender", runs_in="sender", needs_int=True,
                     needs_int_echo=True, settings_argv=cli_args,
                     summary="HPCC per ACK on the INT echoed in ACKs (traffic.cc.hpcc)",
                     sender=lambda cfg, now: HpccSender(cfg.rate_bps, cfg.hpcc)))
