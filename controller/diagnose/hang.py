"""Hangs and mismatches across ranks, from library logs (NCCL lines, flight recorder,
PyTorch watchdog lines): which rank the others wait for, and which peer an error names.

Why sequence numbers and not times: a hung collective has no end and no slow transfer
to measure; what library logs do say is which collective (sequence number within a
communicator) each rank reached, with which operation, size and element type.  So:

* **mismatch**: at the first sequence number where the ranks' (op, bytes, dtype)
  differ, the ranks outside the majority called a different collective (a rank stuck
  in BROADCAST while the others are in ALLREDUCE, a size or dtype that differs): they
  are the culprits.  A rank that skipped a collective and went on to a different one
  shows up here too.
* **missing**: the ranks whose last sequence number is lowest never reached the next
  one, which the others are waiting in; a dump with no entries at all is a rank that
  reached none.  "The lowest sequence number a rank never reached" is in the evidence.
* **stuck**: at the first sequence number not completed everywhere, ranks whose entry
  is less advanced (scheduled vs started, started vs completed: NCCL dumps; gloo and
  NCCL lines carry no state) are stuck before or inside it.  Every rank inside the
  same collective, none behind: the group hangs on something outside the ranks (the
  network, or a rank without a log: a member of the group, by ``pg_config``, whose
  dump is missing is named, 0.6).
* **watchdog**: ranks that time out at SeqNum N wait for one that never enqueued N
  ("last enqueued NCCL work" below N) or printed no timeout.
* **peer errors**: NET/IB completion errors and socket errors name the peer's address;
  an error names the path between two hosts (several hosts naming one peer: that
  peer).  The engine joins these with the topology and telemetry to name a link.

Confidence: mismatch 0.95 (a strict majority) or 0.6 (a tie), missing 0.9 from dumps,
0.7 from NCCL lines (which only say what was enqueued), a peer named by several hosts
0.9, one host's errors about one peer 0.85.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from traffic.collog.nccl import IB_STATUS

if TYPE_CHECKING:
    from controller.diagnose.engine import Culprit
    from controller.diagnose.evidence import Evidence
    from traffic.collog.records import CollRecord

__all__ = ["COLLECTIVE_KINDS", "HangView", "PeerError", "analyse_hang"]

COLLECTIVE_KINDS = ("collective_mismatch", "missing_collective", "stuck_in_collective",
                    "peer_error")
LIBRARY_SOURCES = ("nccl", "flight_recorder")
_STATE_ORDER = {"scheduled": 0, "started": 1, "completed": 2}


@dataclass(slots=True)
class PeerError:
    host: str                 # the host that logged it
    peer: str                 # the address / name it names
    rank: int | None
    peer_rank: int | None
    kinds: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    lines: list[str] = field(default_factory=list)


@dataclass(slots=True)
class HangView:
    culprits: list[Culprit] = field(default_factory=list)
    peer_errors: list[PeerError] = field(default_factory=list)
    summary: dict = field(default_factory=dict)   # per communicator: what was found
    # (comm, rank) -> start of the rank's newest entry there; comm -> ranks waiting in
    # its newest collective while others have not reached it
    newest: dict[tuple[str, int], float] = field(default_factory=dict)
    waiting: dict[str, tuple[int, set[int]]] = field(default_factory=dict)


def _sig(r: CollRecord) -> tuple[str, int, str]:
    return (r.op, r.bytes, r.dtype)


def _culprit(rank: int, kind: str, conf: float, host: str | None, onset: float | None,
             evid: dict) -> Culprit:
    from controller.diagnose.engine import Culprit
    evid = {"host": host, **evid}
    return Culprit(component=str(rank), type="rank", kind=kind, confidence=conf,
                   onset=onset, evidence=evid)


def _group(ev: Evidence, comm: str, recs: list[CollRecord], hosts: dict[int, str],
           out: HangView) -> None:
    by_rank: dict[int, dict[int, CollRecord]] = defaultdict(dict)
    for rec in recs:
        by_rank[rec.rank][rec.seq] = rec
    nccl_only = all(x.source == "nccl" for x in recs)
    members = set(ev.members.get(comm, []))
    # ranks whose log was read but holds nothing at all (an empty dump): members of
    # this group if its members are known, else of every group
    busy = {x.rank for x in ev.records if x.source in LIBRARY_SOURCES}
    for r in ev.ranks_seen - busy:
        if r not in by_rank and (r in members or not members):
            by_rank[r] = {}
    if len(by_rank) < 2 and not members - set(by_rank):
        return
    floor = min(s for d in by_rank.values() for s in d) - 1 if any(by_rank.values()) else 0
    for r, d in by_rank.items():
        if d:
            out.newest[(comm, r)] = max(x.start for x in d.values())
    last = {r: max(d) if d else floor for r, d in by_rank.items()}
    onset = min((x.start for x in recs if x.start), default=None)
    info: dict = {"ranks": sorted(by_rank), "last_seq": {str(r): s for r, s in sorted(last.items())}}
    found = False
    # 1. the first sequence number where the ranks' calls differ
    seqs = sorted({s for d in by_rank.values() for s in d})
    for s in seqs:
        have = {r: d[s] for r, d in by_rank.items() if s in d}
        if len(have) < 2:
            continue
        sigs = Counter(_sig(x) for x in have.values())
        if len(sigs) == 1:
            continue
        (major, n_major), *rest = sigs.most_common()
        tie = bool(rest) and rest[0][1] == n_major
        agree = sorted(r for r, x in have.items() if _sig(x) == major)
        for r, x in sorted(have.items()):
            if _sig(x) == major and not tie:
                continue
            diff = [k for k, a, b in zip(("op", "bytes", "dtype"), _sig(x), major, strict=True)
                    if a != b]
            out.culprits.append(_culprit(
                r, "collective_mismatch", 0.6 if tie else 0.95, hosts.get(r), x.start or onset,
                {"comm": comm, "seq": s, "op": x.op, "bytes": x.bytes, "dtype": x.dtype,
                 "differs_in": diff or ["op", "bytes", "dtype"],
                 "others": {"op": major[0], "bytes": major[1], "dtype": major[2],
                            "ranks": [a for a in agree if a != r]},
                 "tie": tie or None}))
        info["first_mismatch_seq"] = s
        found = True
        break
    # 2. ranks behind the others: the lowest sequence number some rank never reached
    hi, lo = max(last.values()), min(last.values())
    if hi > lo:
        ahead = [by_rank[r][hi] for r in by_rank if last[r] == hi]
        all_done = all(x.state == "completed" for x in ahead)
        info["lowest_unreached_seq"] = lo + 1
        out.waiting[comm] = (hi, {r for r in by_rank if last[r] == hi})
        for r, s in sorted(last.items(), key=lambda kv: (kv[1], kv[0])):
            if s == hi:
                continue
            conf = (0.7 if nccl_only else 0.9) * (1.0 if s == lo else 0.75)
            if all_done:   # the others finished what it lacks: its log is older, no hang
                conf = 0.25
            out.culprits.append(_culprit(
                r, "missing_collective", conf, hosts.get(r), onset,
                {"comm": comm, "never_reached_seq": s + 1, "last_seq": s if by_rank[r] else None,
                 "others_at_seq": hi,
                 "others_in": sorted({x.op for x in ahead}),
                 "empty_log": (not by_rank[r]) or None}))
        found = True
    # 3. the same collective everywhere, some ranks less advanced in it
    if not found:
        common = [s for s in seqs if all(s in d for d in by_rank.values())]
        for s in common:
            states = {r: d[s].state for r, d in by_rank.items()}
            if "" in states.values() or all(v == "completed" for v in states.values()):
                continue
            order = {r: _STATE_ORDER[v] for r, v in states.items()}
            least = min(order.values())
            if least == max(order.values()):
                out.culprits.append(_culprit_group(comm, s, by_rank, onset))
                # members of the group with no log at all: the likeliest to hold it up
                for r in sorted(members - set(by_rank) - ev.ranks_seen):
                    out.culprits.append(_culprit(
                        r, "missing_collective", 0.6, hosts.get(r), onset,
                        {"comm": comm, "no_log": True, "others_inside_seq": s,
                         "others_state": states[next(iter(states))]}))
            else:
                for r in sorted(order):
                    if order[r] == least:
                        out.culprits.append(_culprit(
                            r, "stuck_in_collective", 0.8, hosts.get(r), by_rank[r][s].start,
                            {"comm": comm, "seq": s, "state": states[r],
                             "others": sorted({v for v in states.values() if v != states[r]})}))
            info["stuck_seq"] = s
            break
    out.summary[comm] = info


def _victims(out: HangView) -> None:
    """A rank behind in one group because it waits, later, in another group's collective
    that some rank never reached is a victim of that rank, not the culprit (a hang in a
    sub-group stops the members' next collective of the default group too)."""
    for c in out.culprits:
        if c.kind != "missing_collective" or c.type != "rank":
            continue
        r, comm = int(c.component), c.evidence.get("comm", "")
        mine = out.newest.get((comm, r), float("-inf"))
        for other, (seq, ranks) in sorted(out.waiting.items()):
            if other != comm and r in ranks and out.newest.get((other, r), mine) > mine:
                c.confidence *= 0.5
                c.evidence["waiting_in"] = {"comm": other, "seq": seq}
                break


def _culprit_group(comm: str, seq: int, by_rank: dict[int, dict[int, CollRecord]],
                   onset: float | None) -> Culprit:
    from controller.diagnose.engine import Culprit
    return Culprit(component=comm, type="comm", kind="stuck_in_collective", confidence=0.5,
                   onset=onset, evidence={"seq": seq, "ranks_inside": sorted(by_rank),
                                          "note": "every rank inside it: the network, or a "
                                                  "rank without a log"})


def _watchdog(ev: Evidence, hosts: dict[int, str], out: HangView) -> None:
    timeouts: dict[int, tuple[int, str]] = {}
    enqueued: dict[int, int] = {}
    for e in ev.events:
        if e.rank is None or e.seq is None:
            continue
        if e.kind == "watchdog":
            if e.rank not in timeouts or e.seq < timeouts[e.rank][0]:
                timeouts[e.rank] = (e.seq, e.op)
        elif e.kind == "watchdog_progress" and e.last_enqueued is not None:
            enqueued[e.rank] = max(enqueued.get(e.rank, -1), e.last_enqueued)
            timeouts.setdefault(e.rank, (e.seq, ""))
    if not timeouts:
        return
    stuck_at = Counter(s for s, _ in timeouts.values()).most_common(1)[0][0]
    op = next((o for s, o in timeouts.values() if s == stuck_at and o), "")
    known = set(timeouts) | set(enqueued) | set(ev.ranks_seen) | {
        r.rank for r in ev.records if r.source in LIBRARY_SOURCES}
    info = {"timed_out_at_seq": stuck_at, "op": op, "ranks_timed_out": sorted(timeouts)}
    behind = {r: n for r, n in enqueued.items() if n < stuck_at}
    for r, n in sorted(behind.items(), key=lambda kv: kv[1]):
        out.culprits.append(_culprit(r, "missing_collective", 0.85, hosts.get(r), None, {
            "source": "watchdog", "never_reached_seq": n + 1, "last_enqueued": n,
            "others_timed_out_at_seq": stuck_at, "op": op}))
    if not behind and len(timeouts) >= 2:
        # ranks between the lowest and highest seen that printed no timeout
        silent = sorted((set(range(max(known) + 1)) | known) - set(timeouts))
        for r in silent:
            out.culprits.append(_culprit(r, "missing_collective", 0.5, hosts.get(r), None, {
                "source": "watchdog", "no_timeout_line": True,
                "others_timed_out_at_seq": stuck_at, "op": op}))
        info["ranks_without_timeout"] = silent
        if not silent:   # every rank seen waits in it: something outside the logs
            from controller.diagnose.engine import Culprit
            out.culprits.append(Culprit(
                component=f"seq {stuck_at}", type="comm", kind="stuck_in_collective",
                confidence=0.5, onset=None, evidence={
                    "source": "watchdog", "ranks_timed_out": sorted(timeouts), "op": op,
                    "note": "every rank seen timed out in it: the network, or a rank "
                            "without a log"}))
    out.summary["watchdog"] = info


def _peers(ev: Evidence, hosts: dict[int, str], out: HangView) -> None:
    rank_of_host = {h: r for r, h in hosts.items()}
    rank_of_host.update({r.host: r.rank for r in ev.records if r.host})
    pairs: dict[tuple[str, str], PeerError] = {}
    for e in ev.events:
        if e.kind not in ("net_error", "socket_error") or not e.peer_host:
            continue
        me = e.host or (hosts.get(e.rank, "") if e.rank is not None else "")
        pe = pairs.setdefault((me, e.peer_host), PeerError(
            host=me, peer=e.peer_host, rank=e.rank,
            peer_rank=e.peer_rank if e.peer_rank is not None else rank_of_host.get(e.peer_host)))
        pe.kinds[e.kind] += 1
        if e.status is not None:
            pe.statuses[e.status] += 1
        if len(pe.lines) < 3:
            pe.lines.append(e.where)
    out.peer_errors = list(pairs.values())
    by_peer: dict[str, list[PeerError]] = defaultdict(list)
    for pe in pairs.values():
        by_peer[pe.peer].append(pe)
    from controller.diagnose.engine import Culprit
    for peer, pes in sorted(by_peer.items()):
        reporters = sorted({p.host or "?" for p in pes})
        statuses = Counter[int]()
        for p in pes:
            statuses.update(p.statuses)
        evid = {"named_by": reporters, "peer_rank": pes[0].peer_rank,
                "errors": sum(sum(p.kinds.values()) for p in pes),
                "ib_status": {str(s): IB_STATUS.get(s, "?") for s in statuses} or None,
                "lines": [ln for p in pes for ln in p.lines][:3]}
        if len(reporters) >= 2:
            out.culprits.append(Culprit(component=peer, type="host", kind="peer_error",
                                        confidence=0.9, onset=None, evidence=evid))
        else:
            out.culprits.append(Culprit(component=f"{reporters[0]}<->{peer}", type="path",
                                        kind="peer_error", confidence=0.85, onset=None,
                                        evidence=evid))
    for e in ev.events:
        if e.kind == "mismatch_hint" and e.peer_rank is not None:
            out.culprits.append(_culprit(e.peer_rank, "collective_mismatch", 0.7,
                                         hosts.get(e.peer_rank), e.t,
                                         {"source": "NCCL WARN", "line": e.where}))


def analyse_hang(ev: Evidence) -> HangView:
    """Culprits of a hang or mismatch that library logs show (empty when none)."""
    out = HangView()
    hosts = {r.rank: r.host for r in ev.records if r.host}
    groups: dict[str, list[CollRecord]] = defaultdict(list)
    for r in ev.records:
        # (point-to-point: a send pairs with a recv, nothing to compare across ranks)
        if r.source in LIBRARY_SOURCES and r.dir == "op" and not r.comm.endswith(":p2p"):
            groups[r.comm].append(r)
    if not groups and ev.ranks_seen and ev.members:
        for comm in ev.members:
            groups[comm] = []
    for comm, recs in sorted(groups.items()):
        _group(ev, comm, recs, hosts, out)
    _victims(out)
    _watchdog(ev, hosts, out)
    _peers(ev, hosts, out)
    # one culprit per (type, component): the strongest
    best: dict[str, Culprit] = {}
    for c in out.culprits:
        if c.key not in best or c.confidence > best[c.key].confidence:
            best[c.key] = c
    out.culprits = sorted(best.values(), key=lambda c: (-c.confidence, c.key))
    return out
