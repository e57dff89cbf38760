"""How fast a job recovers from a fault: the figures of ``experiment faults --mitigate``
from a trial's collective records, the controller's logged mitigation actions and its
INT paths (pure functions: the test bed run is ``recovery_run.py``).

Why from the ranks' own records: what matters to a training job is when its
collective runs at its usual pace again and when it completes, not when a counter
moved.  A step of the ring all-reduce (one ``(seq, step)`` of every rank) is the unit:
its time is from the first rank starting it to the last finishing it; the job's rate
is *recovered* once three consecutive steps after the onset have a median within
``tolerance`` (10 %) of the steps' median before the onset.  A job *hung* (completion
None) when a transfer never finished or fewer transfers finished than in the
fault-free warm-up.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["ACTING_VERBS", "Step", "completion_s", "first_action", "format_table",
           "int_paths_after", "recovered_after", "steps", "summarise"]

ACTING_VERBS = ("reroute", "drain", "fec", "move_rank")   # what changes the network or the job
RECOVERY_RUN = 3


@dataclass(frozen=True, slots=True)
class Step:
    seq: int
    step: int
    start: float
    end: float

    @property
    def duration(self) -> float:
        return self.end - self.start


def steps(records: Iterable[Any]) -> list[Step]:
    """The finished steps of the ring (send records grouped by ``(seq, step)``), in the
    order they started; a step with an unfinished transfer is left out."""
    by: dict[tuple[int, int], list[Any]] = {}
    for r in records:
        if r.dir == "send":
            by.setdefault((r.seq, r.step), []).append(r)
    out = [Step(seq=k[0], step=k[1], start=min(r.start for r in rs),
                end=max(r.end for r in rs))
           for k, rs in by.items() if all(r.end is not None for r in rs)]
    return sorted(out, key=lambda s: (s.start, s.seq, s.step))


def completion_s(records: Sequence[Any], start: float, *, expect_sends: int | None = None
                 ) -> float | None:
    """Seconds from ``start`` to the last transfer's end; None when the job hung (a send
    never finished, or fewer than ``expect_sends`` sends were logged)."""
    sends = [r for r in records if r.dir == "send"]
    if not sends or any(r.end is None for r in sends):
        return None
    if expect_sends is not None and len(sends) < expect_sends:
        return None
    return max(r.end for r in sends) - start


def recovered_after(st: Sequence[Step], onset: float, *, tolerance: float = 0.10
                    ) -> float | None:
    """Seconds from ``onset`` to the end of the first step at the old pace (within
    ``tolerance`` of the median step before the onset) in the first ``RECOVERY_RUN``
    consecutive steps, all started after the onset, whose median is at that pace (one
    fast step among slow ones is not a recovery); None if the pace never came back (or
    there was no step before the onset to compare with)."""
    before = [s.duration for s in st if s.end <= onset]
    after = [s for s in st if s.start >= onset]
    if not before or len(after) < RECOVERY_RUN:
        return None
    bound = (1.0 + tolerance) * float(np.median(before))
    for i in range(len(after) - RECOVERY_RUN + 1):
        run = after[i:i + RECOVERY_RUN]
        if float(np.median([s.duration for s in run])) <= bound:
            first = next(s for s in run if s.duration <= bound)
            return max(0.0, first.end - onset)
    return None


def first_action(actions: Iterable[Mapping[str, Any]], link: str, *, since: float
                 ) -> Mapping[str, Any] | None:
    """The first logged action at or after ``since`` that keeps traffic off (or raises
    FEC on) ``link`` (an undirected name, "s1:3-s5:3")."""
    hits = [a for a in actions if a.get("verb") in ACTING_VERBS and link in (a.get("avoid") or ())
            and float(a.get("at") or 0.0) >= since]
    return min(hits, key=lambda a: float(a["at"])) if hits else None


def int_paths_after(flows: Iterable[Any], directions: Iterable[str], t: float
                    ) -> tuple[int, int]:
    """INT flow samples at or after ``t``: (how many crossed one of ``directions``,
    how many in all) - traffic off a link shows as the first number falling to 0."""
    dirs = set(directions)
    later = [f for f in flows if f.t >= t and f.path]
    return sum(1 for f in later if dirs & set(f.path)), len(later)


def _median(xs: Iterable[float | None]) -> float | None:
    v = [x for x in xs if x is not None]
    return float(np.median(v)) if v else None


def summarise(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per fault kind: trials, the medians of the rows' times and ratios, and how many
    runs hung with and without mitigation."""
    out: dict[str, dict[str, Any]] = {}
    for kind in sorted({str(r["fault"]) for r in rows}):
        rs = [r for r in rows if r["fault"] == kind]
        out[kind] = {
            "trials": len(rs),
            **{f"median_{k}": _median(r.get(k) for r in rs)
               for k in ("onset_to_culprit_s", "onset_to_action_s", "onset_to_off_s",
                         "onset_to_recovered_s", "completion_ratio_mitigated",
                         "completion_ratio_unmitigated")},
            "hung_mitigated": sum(1 for r in rs if r.get("completion_ratio_mitigated") is None),
            "hung_unmitigated": sum(1 for r in rs
                                    if r.get("completion_ratio_unmitigated") is None),
        }
    return out


def format_table(by_kind: Mapping[str, Mapping[str, Any]], *, actions_fault_free: int,
                 fault_free_trials: int, flap: Mapping[str, Any] | None = None) -> list[str]:
    """The experiment's table, as printed and as pasted into the README."""
    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f} s"

    def x(v: float | None, hung: int) -> str:
        return ("-" if v is None else f"{v:.2f}x") + (f" ({hung} hung)" if hung else "")

    lines = [("| fault | trials | onset -> culprit | onset -> action | onset -> traffic off "
              "| onset -> rate back | completion, mitigated | completion, unmitigated |"),
             "|---|---|---|---|---|---|---|---|"]
    for kind, k in by_kind.items():
        lines.append(
            f"| {kind} | {k['trials']} | {s(k['median_onset_to_culprit_s'])} "
            f"| {s(k['median_onset_to_action_s'])} | {s(k['median_onset_to_off_s'])} "
            f"| {s(k['median_onset_to_recovered_s'])} "
            f"| {x(k['median_completion_ratio_mitigated'], k['hung_mitigated'])} "
            f"| {x(k['median_completion_ratio_unmitigated'], k['hung_unmitigated'])} |")
    lines.append(f"actions in fault-free runs: {actions_fault_free} in {fault_free_trials}")
    if flap:
        lines.append(f"flapping link {flap['target']} (down {flap['period_s']:g} s of every "
                     f"{2 * flap['period_s']:g} s for {flap['flapping_s']:.1f} s): "
                     f"{flap['actions']} action(s), the hold-down allows {flap['allowed']}")
    return lines
