"""One injected fault: what, where, when, how strong, checked against the topology.

Format (a mapping, e.g. an item of an experiment spec's ``faults`` list)::

    {kind: gray_loss, link: "s1:3->s5:3", onset_s: 3, duration_s: 10, loss: 0.01,
     model: random}                     # or bursty (burst_pkts: 3)
    {kind: rate_degraded, link: "s3:3->s1:1", onset_s: 3, duration_s: 10, factor: 0.2}
    {kind: link_down, link: "s1:3->s5:3", onset_s: 3, duration_s: 10}
    {kind: congestion, link: "s5:1->s7:3", onset_s: 3, duration_s: 10, rate_mbps: 95}
    {kind: tiny_queue, port: "s3:3", onset_s: 3, duration_s: 10, queue_pkts: 2}
    {kind: slow_receiver, host: h5, onset_s: 3, duration_s: 10, delay_s: 0.2}
    {kind: straggler, rank: 2, onset_s: 3, duration_s: 10, late_s: 0.3}

``onset_s`` counts from the start of the workload.  The ground truth a run records
(:meth:`FaultSpec.truth`) names the component the way ``controller.diagnose`` does:
``link s1:3->s5:3`` (one direction), ``port s3:3``, ``host h5``, ``rank 2``.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from common.faults import FAULT_KINDS, LINK_FAULT_KINDS, component_type
from controller.topology.errors import TopologyError
from controller.topology.model import Topology
from mininet_topos.testbed.errors import ExperimentError

__all__ = ["FaultError", "FaultSpec", "parse_fault"]
_KEYS = {"kind", "link", "port", "host", "rank", "onset_s", "duration_s", "loss", "model",
         "burst_pkts", "factor", "rate_mbps", "queue_pkts", "delay_s", "late_s"}


class FaultError(ExperimentError, ValueError):
    """A fault spec that names no such place or has values out of range."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FaultSpec:
    kind: str
    target: str              # "s1:3->s5:3", "s3:3", "h5" or "2"
    onset_s: float
    duration_s: float
    loss: float = 0.01       # gray_loss: mean loss rate (0.001 .. 0.05)
    model: str = "random"    # gray_loss: random | bursty
    burst_pkts: float = 3.0  # gray_loss bursty: mean burst length
    factor: float = 0.2      # rate_degraded: share of the line rate left
    rate_mbps: float = 95.0  # congestion: background rate
    queue_pkts: int = 2      # tiny_queue: the queue's new depth
    delay_s: float = 0.2     # slow_receiver: how long the host holds each packet
    late_s: float = 0.3      # straggler: how late each step is posted

    @property
    def component_type(self) -> str:
        return component_type(self.kind)

    def truth(self, start_unix: float) -> dict[str, Any]:
        """Ground truth of a run: the component as the diagnosis names it, and times."""
        d = asdict(self)
        d.update(component=self.target, type=self.component_type,
                 onset_unix=start_unix + self.onset_s,
                 end_unix=start_unix + self.onset_s + self.duration_s)
        return d

    def matches(self, ctype: str, component: str) -> bool:
        """Whether a culprit names this fault's component (a link that is down is
        down in both directions: either direction counts)."""
        if ctype != self.component_type:
            return False
        if component == self.target:
            return True
        if self.kind == "link_down":
            a, _, b = self.target.partition("->")
            return component == f"{b}->{a}"
        return False


def _num(raw: Mapping[str, Any], key: str, lo: float, hi: float, default: float) -> float:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
        raise FaultError(f"fault {raw.get('kind')}: {key}={v!r} must be a number in "
                         f"{lo:g}..{hi:g}")
    return float(v)


def _directed(topo: Topology, name: str, where: str) -> str:
    names = set()
    for ln in topo.links:
        names |= {f"{ln.a}->{ln.b}", f"{ln.b}->{ln.a}"}
    if name not in names:
        raise FaultError(f"{where}: no link direction {name!r} in topology {topo.name} "
                         "(name one direction, e.g. 's1:3->s5:3')")
    return name


def parse_fault(raw: Any, topo: Topology, *, nranks: int | None = None) -> FaultSpec:
    """Check one fault mapping against ``topo`` and build it (errors name the field)."""
    if not isinstance(raw, Mapping):
        raise FaultError(f"fault: expected a mapping, got {raw!r}")
    extra = set(raw) - _KEYS
    if extra:
        raise FaultError(f"fault: unknown field(s) {sorted(extra)} (allowed: {sorted(_KEYS)})")
    kind = raw.get("kind")
    if kind not in FAULT_KINDS:
        raise FaultError(f"fault: kind {kind!r} not one of {', '.join(FAULT_KINDS)}")
    where = f"fault {kind}"
    if kind in LINK_FAULT_KINDS:
        target = _directed(topo, str(raw.get("link", "")), where)
        if kind != "link_down" and not any(
                s.name == target.split(":")[0] for s in topo.switches):
            raise FaultError(f"{where}: link {target} must leave a switch port (the place "
                             "the fault is applied)")
    elif kind == "tiny_queue":
        target = str(raw.get("port", ""))
        sw, _, port = target.partition(":")
        if not any(s.name == sw for s in topo.switches) or not port.isdigit():
            raise FaultError(f"{where}: port {target!r} is not 'switch:port'")
        try:
            topo.link_at(sw, int(port))
        except TopologyError:
            raise FaultError(f"{where}: switch {sw} has no port {port}") from None
    elif kind == "slow_receiver":
        target = str(raw.get("host", ""))
        if target not in {h.name for h in topo.hosts}:
            raise FaultError(f"{where}: no host {target!r} in topology {topo.name}")
    else:
        r = raw.get("rank")
        if not isinstance(r, int) or isinstance(r, bool) or r < 0 or (
                nranks is not None and r >= nranks):
            raise FaultError(f"{where}: rank {r!r} is not a rank of the workload")
        target = str(r)
    model = raw.get("model", "random")
    if model not in ("random", "bursty"):
        raise FaultError(f"{where}: model {model!r} not one of random, bursty")
    return FaultSpec(
        kind=kind, target=target, onset_s=_num(raw, "onset_s", 0, 86400, 0),
        duration_s=_num(raw, "duration_s", 0.1, 86400, 3600),
        loss=_num(raw, "loss", 0.001, 0.05, 0.01), model=model,
        burst_pkts=_num(raw, "burst_pkts", 1, 100, 3),
        factor=_num(raw, "factor", 0.01, 0.9, 0.2),
        rate_mbps=_num(raw, "rate_mbps", 1, 100_000, 95),
        queue_pkts=int(_num(raw, "queue_pkts", 1, 16, 2)),
        delay_s=_num(raw, "delay_s", 0.01, 5, 0.2), late_s=_num(raw, "late_s", 0.01, 5, 0.3))
