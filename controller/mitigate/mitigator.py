"""The mitigation inside the running controller: findings each tick, the policy's
decisions written to the switches (``act``), or only reported (``advise``).

Why the routes are recomputed, not patched: the intent is a pure function of the
topology, and a reroute is the same function on the topology without the avoided
links (`compute_intent(..., avoid=...)`); each switch whose entries change gets the
difference in one P4Runtime write of modifies (the reconcile of `ManagedSwitch.sync`),
the same plan a restarted switch is refilled by, without reading the tables back.  Undoing is the same computation with
fewer links avoided, so no action leaves anything behind.
"""
from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controller.intent import IntentOptions, compute_intent
from controller.p4rt import ManagedSwitch, P4rtError
from controller.topology import Topology
from traffic.rankmove import move_rank

from .fabric import Fabric
from .findings import Finding
from .job import Job
from .policy import Action, Guard, Policy

__all__ = ["MitigationMode", "Mitigator"]

LOG = logging.getLogger("controller.mitigate")
KEEP_ACTIONS = 200   # the state file's log of actions (the export keeps all)


class MitigationMode(enum.StrEnum):
    OFF = "off"
    ADVISE = "advise"    # decide and log, write nothing
    ACT = "act"


@dataclass(slots=True, kw_only=True)
class Mitigator:
    topo: Topology
    options: IntentOptions
    switches: Mapping[str, ManagedSwitch]
    mode: MitigationMode = MitigationMode.ADVISE
    guard: Guard = field(default_factory=Guard)
    policy: Policy = field(init=False)
    written: frozenset[str] = frozenset()     # the avoided links the switches hold now
    errors: dict[str, int] = field(default_factory=dict)
    path_notices: int = 0     # path notices sent to senders after reroutes (controller.runner)
    job: Job | None = None    # ranks and spares (rank moves); None: a move is only advised
    # how a move is made: (action) -> None when done, else what failed (default: the
    # job's control sockets, traffic.rankmove)
    mover: Callable[[Action], str | None] | None = None
    _unexported: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.policy = Policy(fabric=Fabric(self.topo), guard=self.guard, job=self.job)
        if self.mover is None and self.job is not None:
            self.mover = self._move_by_job

    def step(self, findings: list[Finding], now: float | None = None,
             healthy: Mapping[str, float] | None = None,
             load: Mapping[str, float] | None = None) -> list[Action]:
        """One round: decide, then write (act) or report (advise) what changed;
        ``healthy``: per link, the seconds it carried traffic with no loss (undo evidence);
        ``load``: per host, its traffic (a rank move picks the least loaded spare)."""
        t = time.time() if now is None else now
        return self._apply(self.policy.step(findings, t, healthy, load))

    def _move_by_job(self, a: Action) -> str | None:
        """Move the action's rank to its spare over the job's control sockets."""
        assert self.job is not None
        ev = a.evidence
        res = move_rank(self.job.rank_controls(self.policy.placed), self.job.controls[ev["spare"]],
                        int(ev["rank"]), str(ev["spare_ip"]))
        a.evidence = {**ev, "move": res.as_dict()}
        return None if res.ok else (res.error or "refused")

    def clear(self, now: float | None = None, targets: list[str] | None = None) -> list[Action]:
        """An operator's word that the targets (all: None) were repaired: their actions
        are undone and the routes written (act)."""
        t = time.time() if now is None else now
        return self._apply(self.policy.clear(t, targets))

    def _apply(self, acts: list[Action]) -> list[Action]:
        if not acts:
            return acts
        routing = any(a.verb in ("reroute", "drain") or a.verb == "undo" and a.avoid for a in acts)
        if self.mode is MitigationMode.ACT and routing:
            t0 = time.monotonic()
            err = self._write_routes(self.policy.avoided())
            dt = time.monotonic() - t0
            for a in acts:
                if a.verb in ("reroute", "drain", "undo"):
                    a.outcome, a.write_s = ("written", dt) if err is None else (f"failed: {err}", dt)
        for a in acts:
            if a.verb == "move_rank" and self.mode is MitigationMode.ACT:
                t0 = time.monotonic()
                err = "no mover (no job file)" if self.mover is None else self.mover(a)
                a.outcome, a.write_s = ("written" if err is None else f"failed: {err}"), time.monotonic() - t0
                if err is None:
                    self.policy.moved(int(a.evidence["rank"]), str(a.evidence["spare"]))
        for a in acts:
            if not a.outcome:
                a.outcome = "advised" if self.mode is MitigationMode.ADVISE or a.verb == "none" else "applied"
            LOG.warning("mitigation %s: %s %s (%s, confidence %.2f, %s): %s", a.outcome, a.verb, a.target,
                        a.kind, a.confidence, a.source, a.reason)
        with self._lock:
            self._unexported.extend(a.as_dict() for a in acts)
        return acts

    def fec_links(self) -> frozenset[str]:
        """Links whose flows get FEC raised (acting only)."""
        return self.policy.fec_links() if self.mode is MitigationMode.ACT else frozenset()

    def _write_routes(self, avoid: frozenset[str]) -> str | None:
        """Every switch's routes without ``avoid``; None when all were written.  Only the
        changed entries are written (`ManagedSwitch.update`), all switches at once: a
        reroute is one Write per switch whose routes change, not a sync of each in turn."""
        desired = compute_intent(self.topo, self.options, avoid=avoid)
        todo = [(name, sw) for name, sw in self.switches.items() if sw.desired != desired[name]]
        failed = []

        def one(item: tuple[str, ManagedSwitch]) -> str | None:
            name, sw = item
            if sw.client is None:       # unreachable now: it gets these when it comes back
                sw.desired = desired[name]
                return None
            try:
                sw.update(desired[name])
            except P4rtError as exc:
                self.errors[type(exc).__name__] = self.errors.get(type(exc).__name__, 0) + 1
                return f"{name}: {exc}"
            return None
        if todo:
            with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="mitigate-write") as pool:
                failed = [x for x in pool.map(one, todo) if x]
        self.written = avoid
        return "; ".join(failed) or None

    def take_unexported(self) -> list[dict[str, Any]]:
        """The actions not yet handed to the exporter (each once)."""
        with self._lock:
            out, self._unexported = self._unexported, []
        return out

    def snapshot(self) -> dict[str, Any]:
        """The ``mitigation`` key of the controller's state file."""
        p = self.policy
        counts: dict[str, int] = {}
        for a in p.log:
            counts[a.verb] = counts.get(a.verb, 0) + 1
        return {"mode": str(self.mode), "avoided": sorted(p.avoided()), "fec_links": sorted(p.fec_links()),
                "written_avoid": sorted(self.written),
                "active": [{**a.action.as_dict(), "since": a.since, "last_seen": a.last_seen}
                           for a in p.active.values()],
                "counts": counts, "errors": dict(self.errors), "path_notices": self.path_notices,
                "actions": [a.as_dict() for a in p.log[-KEEP_ACTIONS:]]}
