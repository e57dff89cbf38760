"""The collective's own view: which transfers were slow or hung, and which ranks late.

Why per rank pair: transfers between two ranks always take the same path and carry
similar sizes, so the pair's own early transfers are the baseline of its later ones
(a WAN pair is slower than a pair in one rack without anything being wrong).  A
transfer is *slow* when it takes more than ``SLOW_RATIO`` times its pair's baseline
(and at least ``SLOW_ABS_S`` more); *hung* when it has not finished ``HUNG_S`` after
it started.  A rank is *late* when it posts a step well after the data it depends on
arrived (the ring's dependency: step s is sent once step s-1 was received), which
the network cannot cause: that is a straggler.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from traffic.collog.records import CollRecord

__all__ = ["PairStats", "TransferView", "analyse"]

SLOW_RATIO = 2.0     # a window's median duration this many times the pair's baseline ...
SLOW_ABS_S = 0.015   # ... and at least this much longer is slow
WINDOW_S = 0.5       # transfers are judged in windows of this length
MIN_IN_WINDOW = 2    # ... holding at least this many transfers of the pair
HUNG_S = 2.0         # unfinished this long: hung (a run cut short leaves younger ones)
STALLED_X = 3.0      # unfinished this many times its pair's baseline (and HUNG_S): stalled
LATE_S = 0.1         # a rank posting a step this much later than the others is late
BASE_N = 6           # baseline: the median of the pair's first transfers
MIN_LATE = 3         # a rank is late with at least this many late operations ...
MIN_LATE_STEPS = 2   # ... or late ring steps (each one step of a ring: 1-2 s on the
                     # Python target; no rank was late twice by chance in 147 trials of
                     # issue #24's runs, at any time)
MIN_SLOW_WINDOWS = 3  # a pair is slow in at least this many windows (a fault persists,
                      # a machine-wide stall of a loaded host passes)
BASE_FLOOR = 0.75     # a pair's baseline is at least this share of the pairs' median one


@dataclass(slots=True)
class PairStats:
    src: int
    dst: int
    n: int = 0
    slow: int = 0
    hung: int = 0
    stalled: int = 0     # open transfers older than STALLED_X x baseline (hung ones too)
    retx: int = 0
    timeouts: int = 0
    baseline_s: float = 0.0
    worst_ratio: float = 1.0
    first_bad: float | None = None   # start of the first slow / hung transfer

    @property
    def bad(self) -> int:
        """Transfers in slow windows plus hung transfers."""
        return self.slow + self.hung


@dataclass(slots=True)
class TransferView:
    pairs: dict[tuple[int, int], PairStats] = field(default_factory=dict)
    late: dict[int, list[tuple[float, float]]] = field(default_factory=dict)  # rank -> (t, s)
    ranks: set[int] = field(default_factory=set)
    n_transfers: int = 0
    t0: float = 0.0
    t1: float = 0.0
    steps: list[tuple[int, float, float, float]] = field(default_factory=list)  # rank, t0, t1, ratio
    op: str = ""

    @property
    def bad_pairs(self) -> set[tuple[int, int]]:
        return {k for k, p in self.pairs.items() if p.bad > 0}

    @property
    def stalled_pairs(self) -> set[tuple[int, int]]:
        """Pairs with a transfer open ``STALLED_X`` times their baseline: where a dead
        link's silence is looked for (``hung`` waits 10x, seconds on a slow target)."""
        return {k for k, p in self.pairs.items() if p.stalled > 0}

    @property
    def onset(self) -> float | None:
        ts = [p.first_bad for p in self.pairs.values() if p.first_bad is not None]
        ts += [t for v in self.late.values() for t, _ in v]
        return min(ts) if ts else None


def analyse(records: list[CollRecord], now: float) -> TransferView:
    """Slow and hung transfers per rank pair, late ranks, from the sends (and receives).

    Why windows normalised across pairs: on a loaded machine every transfer of every
    rank can stall for a while together (the CPU was busy); a fault slows the transfers
    under it and not the others.  So a pair is slow in a window when its median there
    is ``SLOW_RATIO`` times its baseline *and* that ratio is as far above the least
    affected pair's ratio in the same window.
    """
    v = TransferView()
    sends = sorted((r for r in records if r.dir == "send" and r.peer is not None),
                   key=lambda r: r.start)
    v.ranks = {r.rank for r in records}
    if records:
        v.t0 = min(r.start for r in records)
        v.t1 = now
        v.op = records[0].op
    by_pair: dict[tuple[int, int], list[CollRecord]] = defaultdict(list)
    for r in sends:
        assert r.peer is not None
        by_pair[(r.rank, r.peer)].append(r)
    # window -> pair -> (median ratio, excess s, transfers, counts in the floor)
    win: dict[int, dict[tuple[int, int],
                        tuple[float, float, list[CollRecord], bool]]] = defaultdict(dict)
    floor_s = BASE_FLOOR * _typical_baseline(by_pair)
    for key, rs in by_pair.items():
        ps = PairStats(src=key[0], dst=key[1])
        done = [r.end - r.start for r in rs if r.end is not None]
        ps.baseline_s = max(float(np.median(done[:BASE_N])), floor_s) if done else 0.0
        groups: dict[int, list[CollRecord]] = defaultdict(list)
        for r in rs:
            ps.n += 1
            ps.retx += r.retx
            ps.timeouts += r.timeouts
            if r.end is None:
                if now - r.start >= max(HUNG_S, STALLED_X * ps.baseline_s):
                    ps.stalled += 1
                if now - r.start >= max(HUNG_S, 10 * ps.baseline_s):
                    ps.hung += 1
                    ps.first_bad = r.start if ps.first_bad is None else min(ps.first_bad, r.start)
                    v.steps.append((r.rank, r.start, now, float("inf")))
                else:   # its age so far: the least it will take
                    groups[int((r.start - v.t0) / WINDOW_S)].append(r)
                continue
            d = r.end - r.start
            v.steps.append((r.rank, r.start, r.end, d / ps.baseline_s if ps.baseline_s else 1.0))
            groups[int((r.start - v.t0) / WINDOW_S)].append(r)
        for w, grp in groups.items():
            if len(grp) < MIN_IN_WINDOW or ps.baseline_s <= 0:
                continue
            # the finished transfers' median (the first to finish are the fast ones),
            # or the median with the open ones at their age so far, a lower bound of
            # the median they will have: a slowdown shows while its transfers last
            fin = [r.end - r.start for r in grp if r.end is not None]
            lower = float(np.median([(r.end if r.end is not None else now) - r.start
                                     for r in grp]))
            med = max(float(np.median(fin)), lower) if fin else lower
            win[w][key] = (med / ps.baseline_s, med - ps.baseline_s, grp,
                           len(fin) >= MIN_IN_WINDOW or med >= SLOW_RATIO * ps.baseline_s)
        v.pairs[key] = ps
        v.n_transfers += ps.n
    slow_windows: dict[tuple[int, int], list[tuple[int, float, float]]] = defaultdict(list)
    for w, pairs in win.items():
        # (the floor from pairs with enough finished transfers, or already slow by their
        # open ones' age: a pair whose transfers just started says nothing yet, and
        # must not lower the others' floor; a stall of every pair is no pair's fault)
        known = [x[0] for x in pairs.values() if x[3]]
        floor = max(1.0, min(known)) if len(known) > 1 else 1.0
        for key, (ratio, excess, grp, _known) in pairs.items():
            if ratio >= SLOW_RATIO * floor and excess >= SLOW_ABS_S:
                slow_windows[key].append((len(grp), ratio / floor,
                                          min(r.start for r in grp)))
    for key, ws in slow_windows.items():
        if len(ws) < MIN_SLOW_WINDOWS:
            continue
        ps = v.pairs[key]
        ps.slow = sum(n for n, _, _ in ws)
        ps.worst_ratio = max(r for _, r, _ in ws)
        t = min(t for _, _, t in ws)
        ps.first_bad = t if ps.first_bad is None else min(ps.first_bad, t)
    v.late = _late_ranks(records)
    return v


def _baseline(rs: list[CollRecord]) -> float | None:
    done = [r.end - r.start for r in rs if r.end is not None]
    return float(np.median(done[:BASE_N])) if done else None


def _typical_baseline(by_pair: dict[tuple[int, int], list[CollRecord]]) -> float:
    """The median of the pairs' baselines (0 with fewer than three pairs).

    Why a pair's baseline is kept near it: the ring's pairs move chunks of one size at
    one paced rate, so they take about as long as each other; a pair whose first
    transfers ran much faster than every other pair's caught an idle moment (on a
    software switch of a loaded machine transfers vary 0.3-2.7 s without a fault), and
    its later, ordinary transfers would then read as a slowdown of 2-6x."""
    bases = [b for rs in by_pair.values() if (b := _baseline(rs)) is not None]
    return float(np.median(bases)) if len(bases) >= 3 else 0.0


def _late_ranks(records: list[CollRecord]) -> dict[int, list[tuple[float, float]]]:
    """Ranks that posted a step long after its input arrived (ring all-reduce), or
    started an operation long after every other rank (other collectives)."""
    late: dict[int, list[tuple[float, float]]] = defaultdict(list)
    if not records:
        return {}
    if records[0].op == "allreduce" and any(r.dir == "recv" for r in records):
        recv_end: dict[tuple[int, int, int], float] = {}
        send_start: dict[tuple[int, int, int], float] = {}
        steps = 0
        for r in records:
            key = (r.rank, r.seq, r.step)
            steps = max(steps, r.step + 1)
            if r.dir == "recv" and r.end is not None:
                recv_end[key] = max(recv_end.get(key, 0.0), r.end)
            elif r.dir == "send":
                send_start[key] = min(send_start.get(key, r.start), r.start)
        gaps: dict[tuple[int, int], dict[int, tuple[float, float]]] = defaultdict(dict)
        for (rank, seq, step), t in send_start.items():
            prev = (rank, seq, step - 1) if step > 0 else (rank, seq - 1, steps - 1)
            if prev in recv_end:
                gaps[(seq, step)][rank] = (recv_end[prev], t - recv_end[prev])
        for by_rank in gaps.values():
            for rank, (t_in, gap) in by_rank.items():
                others = [g for r, (_, g) in by_rank.items() if r != rank]
                if others and gap - float(np.median(others)) > LATE_S:
                    late[rank].append((t_in, gap))
        return {r: v for r, v in late.items() if len(v) >= MIN_LATE_STEPS}
    first: dict[tuple[int, int], float] = {}
    for r in records:
        if r.dir in ("send", "op"):
            k = (r.seq, r.rank)
            first[k] = min(first.get(k, r.start), r.start)
    by_seq: dict[int, dict[int, float]] = defaultdict(dict)
    for (seq, rank), t in first.items():
        by_seq[seq][rank] = t
    for ts in by_seq.values():
        if len(ts) < 3:
            continue
        med = float(np.median(list(ts.values())))
        for rank, t in ts.items():
            if t - med > LATE_S:
                late[rank].append((med, t - med))
    return {r: v for r, v in late.items() if len(v) >= MIN_LATE}


def pair_slowdowns(records: list[CollRecord], t_on: float) -> dict[tuple[int, int], float]:
    """Rank pair -> median transfer time since ``t_on`` over the median before it (1.0
    where either side has no finished transfer).

    Why beside the slow/hung flags: a slow receiver host slows both pairs at it (data
    into it waits, and so do the ACKs of its own sends), often one of them below the
    ``SLOW_RATIO`` flag; the host whose *both* pairs slowed is the one, not the host
    on the far end of the one flagged pair.  The pair's time before the onset is its
    baseline here (its first transfers can be slow while the ring starts up)."""
    by_pair: dict[tuple[int, int], tuple[list[float], list[float]]] = defaultdict(
        lambda: ([], []))
    for r in records:
        if r.dir != "send" or r.peer is None or r.end is None:
            continue
        before, after = by_pair[(r.rank, r.peer)]
        (after if r.start >= t_on else before).append(r.end - r.start)
    out = {}
    for key, (before, after) in by_pair.items():
        b = float(np.median(before)) if before else 0.0
        out[key] = float(np.median(after)) / b if before and after and b > 0 else 1.0
    return out
