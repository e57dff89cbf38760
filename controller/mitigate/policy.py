"""Mitigation policy: findings in, actions out, each behind a guard, each undone.

The table (what a finding asks for):

===========================  ===========================================================
finding                      action
===========================  ===========================================================
link gray_loss               reroute: routes keep off the link; no other way: raise FEC
link rate_degraded           reroute; no other way: none (FEC cannot add capacity)
link link_down               reroute at once (no confirmation wait)
port tiny_queue (fabric)     reroute off the port's link
two or more links of one     drain the switch (routes keep off all its links), where no
switch at once               host hangs off it and the rest stays connected
link congestion              none: the congestion control's job, not a fault
host / rank (slow receiver,  move_rank: the rank to the least loaded spare host of its
straggler)                   leaf that no finding names; no job file or no such spare:
                             none (advice: which rank, and why no spare)
===========================  ===========================================================

The guard: a finding below ``min_confidence`` is ignored; one that is not a dead
link must be named for ``confirm_s`` before anything happens (unless its source's rule
is its own confirmation: the loss counters' confident rate, the sequence registers'
confirming read); at most
``budget_per_min`` actions in any 60 s; an action stays at least its hold-down and is
undone only when the links it keeps traffic off were shown healthy: each direction
carried traffic with no loss for ``healthy_s`` (``healthy``, from the link sequence
counters), and nothing named its target for ``clear_s``.  Never on the mere absence
of evidence: a link the routes keep off carries nothing, and the undo used to be the
probe (traffic went back after the hold-down; a still dead link stalled the job
again).  Until probes can cross an avoided link (the program has no packet-out), such
a link comes back by an operator's word (``clear``: the link was repaired).  If an
undone target is named again it is acted on again with its hold-down doubled (up to
``hold_down_max_s``, forgotten after ``forget_s`` clean): a flapping link is acted on
at most once per hold-down, and less often each time.

Why pure: no clock, no switches - ``Policy.step(findings, now)`` returns the decisions,
the caller (`controller.mitigate.Mitigator`) writes them or only reports them, and
the table above is tested row by row.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .fabric import Fabric
from .findings import Finding
from .job import Job

__all__ = ["VERBS", "Action", "Guard", "Policy"]

VERBS = ("reroute", "drain", "fec", "move_rank", "none", "undo")
REROUTE_KINDS = ("gray_loss", "rate_degraded", "link_down")


@dataclass(frozen=True, slots=True, kw_only=True)
class Guard:
    min_confidence: float = 0.5
    confirm_s: float = 0.5
    at_once: tuple[str, ...] = ("link_down",)
    # sources whose rule is its own confirmation (the loss counters' confident rate,
    # the sequence registers' confirming read of a dead link)
    confirmed_sources: tuple[str, ...] = ("lossmap", "counters")
    hold_down_s: float = 10.0
    hold_down_max_s: float = 300.0
    clear_s: float = 3.0
    healthy_s: float = 10.0      # traffic with no loss this long over a link before an undo
    budget_per_min: int = 6
    forget_s: float = 600.0


@dataclass(slots=True, kw_only=True)
class Action:
    """One decision, as logged: what, on what, why, on which evidence, when."""

    seq: int
    verb: str
    target: str                    # link "s1:3-s5:3" or switch "s3" (or the component)
    avoid: tuple[str, ...] = ()    # the links the routes keep off while it holds
    kind: str = ""
    component: str = ""
    confidence: float = 0.0
    onset: float | None = None
    source: str = ""
    reason: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0
    hold_s: float = 0.0
    undoes: int | None = None      # an undo: the seq of the action it ends
    outcome: str = ""              # set by the caller: written | advised | failed: ...
    write_s: float | None = None   # how long writing it took

    def as_dict(self) -> dict[str, Any]:
        return {"seq": self.seq, "verb": self.verb, "target": self.target, "avoid": list(self.avoid),
                "kind": self.kind, "component": self.component,
                "confidence": round(self.confidence, 3), "onset": self.onset, "source": self.source,
                "reason": self.reason, "evidence": self.evidence, "at": self.at,
                "hold_s": self.hold_s, "undoes": self.undoes, "outcome": self.outcome,
                "write_s": self.write_s}


@dataclass(slots=True, kw_only=True)
class _Plan:
    verb: str
    target: str
    avoid: frozenset[str]
    finding: Finding
    reason: str


@dataclass(slots=True, kw_only=True)
class _Active:
    action: Action
    since: float
    last_seen: float


@dataclass(slots=True, kw_only=True)
class Policy:
    fabric: Fabric
    guard: Guard = field(default_factory=Guard)
    active: dict[str, _Active] = field(default_factory=dict)
    log: list[Action] = field(default_factory=list)
    _seq: int = 0
    _first_seen: dict[str, float] = field(default_factory=dict)
    _noted: dict[str, str] = field(default_factory=dict)       # target -> reason of the last "none"
    _repeats: dict[str, tuple[int, float]] = field(default_factory=dict)   # target -> (undos, last undo)
    _acts: deque[float] = field(default_factory=deque)
    job: Job | None = None         # ranks, spares, their sockets (rank moves); None: advice
    placed: dict[int, str] = field(default_factory=dict)     # rank -> spare it was moved to
    _faulty: frozenset[str] = frozenset()                     # hosts named this round
    _load: Mapping[str, float] = field(default_factory=dict)  # host -> load this round

    # ------------------------------------------------------------------ what holds
    def avoided(self) -> frozenset[str]:
        """Links the routes keep off now (reroutes and drains)."""
        return frozenset(x for a in self.active.values() if a.action.verb in ("reroute", "drain")
                         for x in a.action.avoid)

    def fec_links(self) -> frozenset[str]:
        return frozenset(x for a in self.active.values() if a.action.verb == "fec" for x in a.action.avoid)

    # ------------------------------------------------------------------ the table
    def _plan(self, f: Finding) -> _Plan:
        fb = self.fabric
        if f.type in ("host", "rank"):
            return self._move(f)
        if f.type == "switch":
            return self._drain(f.component, f)
        link = fb.link_of(f.component)
        if f.kind == "congestion":
            return _Plan(verb="none", target=link or f.component, avoid=frozenset(), finding=f,
                         reason="congestion: left to the congestion control")
        if link is None:
            return _Plan(verb="none", target=f.component, avoid=frozenset(), finding=f,
                         reason=f"{f.component} is no fabric link: no other way to its host")
        if f.type == "port" and f.kind != "tiny_queue" or f.type == "link" and f.kind not in REROUTE_KINDS:
            return _Plan(verb="none", target=link, avoid=frozenset(), finding=f,
                         reason=f"no action for {f.kind} at a {f.type}")
        want = self.avoided() | {link}
        if fb.can_avoid(want):
            return _Plan(verb="reroute", target=link, avoid=frozenset({link}), finding=f,
                         reason=f"{f.kind} on {f.component}: routes keep off {link}")
        if f.kind == "gray_loss":
            return _Plan(verb="fec", target=link, avoid=frozenset({link}), finding=f,
                         reason=f"gray loss on {f.component} and no other way around it: raise FEC "
                                "on the flows that cross it")
        return _Plan(verb="none", target=link, avoid=frozenset(), finding=f,
                     reason=f"{f.kind} on {f.component}: no other way around it")

    def _rank_of(self, f: Finding) -> int | None:
        """The rank a host or rank finding names (a host: the one rank it runs now)."""
        job = self.job
        if f.type == "rank":
            try:
                r = int(f.component)
            except ValueError:
                return None
            return r if job is None or 0 <= r < len(job.ranks) else None
        if job is None:
            ranks = f.evidence.get("ranks")
            return int(ranks[0]) if isinstance(ranks, list) and len(ranks) == 1 else None
        on = [r for r, h in enumerate(job.ranks) if self.placed.get(r, h) == f.component]
        return on[0] if len(on) == 1 else None

    def _move(self, f: Finding) -> _Plan:
        """A slow host or straggling rank: move the rank to a spare host of its leaf (the
        same failure domain), the least loaded one that no finding names; else advice."""
        what = f"{f.kind} at {f.type} {f.component}: the network is not the cause"
        rank = self._rank_of(f)
        job = self.job
        if rank is None:
            return _Plan(verb="none", target=f"{f.type} {f.component}", avoid=frozenset(), finding=f,
                         reason=f"{what}; no single rank known there (advice: move its rank to a spare host)")
        target = f"rank {rank}"
        if job is None:
            return _Plan(verb="none", target=target, avoid=frozenset(), finding=f,
                         reason=f"{what}; move rank {rank} to a spare host (advice: no job file, so no "
                                "spares known)")
        host = self.placed.get(rank, job.ranks[rank])
        leaf = job.leaves[host]
        used = set(self.placed.values())
        cands = [h for h in job.spares if job.leaves[h] == leaf and h not in used and h not in self._faulty]
        if not cands:
            return _Plan(verb="none", target=target, avoid=frozenset(), finding=f,
                         reason=f"{what}; no free, healthy spare host on {leaf}, the leaf of {host} "
                                f"(advice: move rank {rank} by hand)")
        spare = min(cands, key=lambda h: (self._load.get(h, 0.0), h))
        f2 = Finding(kind=f.kind, type=f.type, component=f.component, confidence=f.confidence, onset=f.onset,
                     source=f.source, evidence={**f.evidence, "rank": rank, "from_host": host, "spare": spare,
                                                "spare_ip": job.ips[spare], "leaf": leaf,
                                                "spare_load": {h: self._load.get(h, 0.0) for h in cands}})
        return _Plan(verb="move_rank", target=target, avoid=frozenset(), finding=f2,
                     reason=f"{what}: move rank {rank} from {host} to spare {spare} (same leaf {leaf}, "
                            f"least loaded of {len(cands)})")

    def moved(self, rank: int, spare: str) -> None:
        """The caller moved ``rank`` to ``spare``: the rank lives there from now on."""
        self.placed[rank] = spare

    def _drain(self, switch: str, f: Finding) -> _Plan:
        fb = self.fabric
        links = frozenset(fb.switch_links(switch))
        if fb.has_hosts(switch):
            return _Plan(verb="none", target=switch, avoid=frozenset(), finding=f,
                         reason=f"switch {switch} has hosts: it cannot be drained")
        if not links or not fb.can_avoid(self.avoided() | links):
            return _Plan(verb="none", target=switch, avoid=frozenset(), finding=f,
                         reason=f"switch {switch}: no way around it")
        return _Plan(verb="drain", target=switch, avoid=links, finding=f,
                     reason=f"{f.kind} at switch {switch}: routes keep off all its links")

    def _urgency(self, f: Finding) -> tuple[bool, float]:
        return (f.kind in self.guard.at_once, f.confidence)

    def _plans(self, findings: Iterable[Finding]) -> list[_Plan]:
        """One plan per target (the most confident finding); links of one switch named
        together (two or more, each a reroute) become a drain of that switch."""
        findings = list(findings)
        self._faulty = frozenset(f.component for f in findings if f.type == "host"
                                 and f.confidence >= self.guard.min_confidence)
        best: dict[str, _Plan] = {}
        for f in findings:
            if f.confidence < self.guard.min_confidence:
                continue
            p = self._plan(f)
            old = best.get(p.target)
            if old is None or self._urgency(f) > self._urgency(old.finding):
                best[p.target] = p
        reroutes = [p for p in best.values() if p.verb == "reroute"]
        at: dict[str, list[_Plan]] = {}
        for p in reroutes:
            for ep in p.target.split("-"):
                at.setdefault(ep.split(":")[0], []).append(p)
        for sw, ps in sorted(at.items(), key=lambda kv: -len(kv[1])):
            if len(ps) < 2 or any(p.target not in best for p in ps):
                continue
            d = self._drain(sw, max(ps, key=lambda p: self._urgency(p.finding)).finding)
            if d.verb == "drain":
                for p in ps:
                    best.pop(p.target, None)
                best[sw] = d
        return list(best.values())

    # ------------------------------------------------------------------ one round
    def step(self, findings: Iterable[Finding], now: float,
             healthy: Mapping[str, float] | None = None,
             load: Mapping[str, float] | None = None) -> list[Action]:
        """The decisions of this round (acts, advice, undos), appended to ``log``;
        ``healthy``: per link (by name), the seconds it has carried traffic in both
        directions with no loss (the only evidence an undo is taken on); ``load``: per
        host, its traffic now (bit/s, from the telemetry: a move picks the least loaded
        spare)."""
        g = self.guard
        self._load = load or {}
        out: list[Action] = []
        while self._acts and self._acts[0] <= now - 60.0:
            self._acts.popleft()
        seen: set[str] = set()
        avoided = self.avoided()
        for p in self._plans(findings):
            seen.add(p.target)
            if p.target in self.active:
                self.active[p.target].last_seen = now
                continue
            if p.verb in ("reroute", "drain") and p.avoid <= avoided:
                for held in self.active.values():     # already kept off by another action
                    if p.avoid & set(held.action.avoid):
                        held.last_seen = now
                continue
            first = self._first_seen.setdefault(p.target, now)
            if p.finding.kind not in g.at_once and p.finding.source not in g.confirmed_sources \
                    and now - first < g.confirm_s:
                continue
            if p.verb == "none":
                if self._noted.get(p.target) != p.reason:
                    self._noted[p.target] = p.reason
                    out.append(self._new(p, now, hold_s=0.0))
                continue
            if len(self._acts) >= g.budget_per_min:
                reason = f"budget: {g.budget_per_min} actions in the last minute; would {p.verb} {p.target}"
                if self._noted.get(p.target) != reason:
                    self._noted[p.target] = reason
                    out.append(self._new(_Plan(verb="none", target=p.target, avoid=frozenset(),
                                               finding=p.finding, reason=reason), now, hold_s=0.0))
                continue
            n, last = self._repeats.get(p.target, (0, 0.0))
            if n and now - last > g.forget_s:
                n = 0
            hold = min(g.hold_down_max_s, g.hold_down_s * 2 ** n)
            a = self._new(p, now, hold_s=hold)
            if n:
                a.reason += f" (again: {n} time(s) before; hold-down {hold:g} s)"
            self.active[p.target] = _Active(action=a, since=now, last_seen=now)
            self._acts.append(now)
            self._noted.pop(p.target, None)
            avoided = self.avoided()
            out.append(a)
        for t in list(self._first_seen):
            if t not in seen:
                del self._first_seen[t]
        for t in [t for t in self._noted if t not in seen]:
            del self._noted[t]
        shown = healthy or {}
        for t, act in list(self.active.items()):
            if now - act.last_seen < g.clear_s or now - act.since < act.action.hold_s:
                continue
            clean = [shown.get(x) for x in act.action.avoid]
            if not clean or any(c is None or c < g.healthy_s for c in clean):
                continue       # no evidence that the links are healthy: they stay off
            out.append(self._undo(t, act, now, reason=(
                f"not named for {now - act.last_seen:.1f} s, held {now - act.since:.1f} s "
                f"(hold-down {act.action.hold_s:g} s) and {', '.join(act.action.avoid)} carried "
                f"traffic with no loss for {min(c for c in clean if c is not None):.1f} s: "
                f"traffic may use {t} again")))
        return out

    def clear(self, now: float, targets: Iterable[str] | None = None,
              reason: str = "operator: repaired") -> list[Action]:
        """Undo the actions on ``targets`` (all: None) on an operator's word (the link or
        switch was repaired): evidence the counters cannot give while the routes keep
        traffic off it."""
        want = None if targets is None else set(targets)
        for t, act in self.active.items():   # a rank moved: the job was set right again
            if act.action.verb == "move_rank" and (want is None or t in want):
                self.placed.pop(int(act.action.evidence.get("rank", -1)), None)
        return [self._undo(t, act, now, reason=f"{reason}: traffic may use {t} again")
                for t, act in list(self.active.items()) if want is None or t in want]

    def _undo(self, t: str, act: _Active, now: float, *, reason: str) -> Action:
        del self.active[t]
        g = self.guard
        n, last = self._repeats.get(t, (0, 0.0))
        if n and now - last > g.forget_s:
            n = 0
        self._repeats[t] = (n + 1, now)
        self._seq += 1
        u = Action(seq=self._seq, verb="undo", target=t, avoid=act.action.avoid,
                   kind=act.action.kind, component=act.action.component, reason=reason,
                   at=now, undoes=act.action.seq, source=act.action.source)
        self.log.append(u)
        return u

    def _new(self, p: _Plan, now: float, *, hold_s: float) -> Action:
        self._seq += 1
        f = p.finding
        a = Action(seq=self._seq, verb=p.verb, target=p.target, avoid=tuple(sorted(p.avoid)), kind=f.kind,
                   component=f.component, confidence=f.confidence, onset=f.onset, source=f.source,
                   reason=p.reason, evidence=dict(f.evidence), at=now, hold_s=hold_s)
        self.log.append(a)
        return a
