"""The fault kinds, defined once: what the test bed injects and the diagnosis names.

``mininet_topos.faults`` injects these kinds (its specs name them) and
``controller.diagnose`` answers with them; a run is scored by comparing the two, so
both read the names and the kind of component each one is found at from here.  Adding
a fault kind: a line here, its injection (``mininet_topos/faults/inject.py``), its
evidence rule (``controller/diagnose/engine.py``), the spec's fields of it
(``mininet_topos/faults/spec.py``) and its tests.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["FAULTS", "FAULT_KINDS", "LINK_FAULT_KINDS", "FaultKind", "component_type"]

Component = Literal["link", "port", "host", "rank"]


@dataclass(frozen=True, slots=True)
class FaultKind:
    name: str
    component: Component   # where it sits: a directed link, a switch port, a host, a rank
    summary: str


FAULTS: tuple[FaultKind, ...] = (
    FaultKind("gray_loss", "link", "a link loses a share of its packets (random or bursty)"),
    FaultKind("rate_degraded", "link", "a link runs at a fraction of its rate"),
    FaultKind("link_down", "link", "a link loses every packet"),
    FaultKind("congestion", "link", "background traffic fills a link"),
    FaultKind("tiny_queue", "port", "a switch port's queue holds only a few packets"),
    FaultKind("slow_receiver", "host", "a host holds every packet it receives"),
    FaultKind("straggler", "rank", "a collective's rank posts its steps late"),
)
FAULT_KINDS: tuple[str, ...] = tuple(k.name for k in FAULTS)
LINK_FAULT_KINDS: tuple[str, ...] = tuple(k.name for k in FAULTS if k.component == "link")
_COMPONENT = {k.name: k.component for k in FAULTS}


def component_type(kind: str) -> Component:
    """Where a fault of ``kind`` sits (KeyError for a kind that is not one)."""
    return _COMPONENT[kind]
