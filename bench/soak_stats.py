"""Verdicts of the soak benchmark: memory slopes, drops by kind, exported telemetry.

Pure functions on numbers the soak collected (no processes, no files), so the rules
that decide its exit status are unit-tested on their own:

* memory: least-squares slope of each process's RSS after the warm-up, in MB/min;
  a kind is "growing" when its worst process grows faster than
  :data:`MAX_SLOPE_MB_PER_MIN`, "flat" otherwise, and "too short" when the window
  after the warm-up is under :data:`MIN_WINDOW_S` (a slope over seconds says nothing);
* drops: every counter the test bed keeps, each either explained by the experiment
  (configured WAN loss, tail drops of a full queue) or flagged unexplained;
* export: lines the controller says it delivered per measurement against the points
  the server holds.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "EXEMPT_KINDS", "MAX_SLOPE_MB_PER_MIN", "MIN_WINDOW_S", "DropRow", "ExportCheck", "ExportRow",
    "MemoryRow", "classify_drops", "compare_export", "memory_rows", "slope_mb_per_min",
]

#: per process: 1 MB/min is 10 MB over the 10-minute soak, well above allocator noise of
#: a settled Python process and well below a leak of one object per packet or record
MAX_SLOPE_MB_PER_MIN = 1.0
#: the memory verdict needs this much time after the warm-up
MIN_WINDOW_S = 120.0
#: kinds whose growth is their job (the database stores what it receives): shown, not judged
EXEMPT_KINDS = frozenset({"influxd"})


class SoakStatsError(ValueError):
    """Samples the soak cannot judge (mismatched lengths, negative times)."""


def slope_mb_per_min(t_s: Iterable[float], rss_bytes: Iterable[float]) -> float:
    """Least-squares slope of RSS over time, in MB/min (0.0 with fewer than 2 samples or
    all samples at one time)."""
    t = np.asarray(list(t_s), dtype=np.float64)
    y = np.asarray(list(rss_bytes), dtype=np.float64) / 1e6
    if t.shape != y.shape:
        raise SoakStatsError(f"slope: {t.size} times but {y.size} RSS samples")
    if t.size < 2 or np.ptp(t) == 0:
        return 0.0
    tc = t - t.mean()
    return float((tc * (y - y.mean())).sum() / (tc * tc).sum() * 60.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRow:
    """One process kind: RSS after the warm-up and at the end (mean over its processes),
    the worst process's slope and the verdict."""

    kind: str
    processes: int
    start_mb: float
    end_mb: float
    slope_mb_per_min: float
    worst: str                  # the process with that slope
    cpu_pct: float              # mean CPU of one process of the kind over the run
    verdict: str                # flat | growing | too short | not judged

    @property
    def failed(self) -> bool:
        return self.verdict == "growing"


def memory_rows(series: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]], *,
                warmup_s: float, max_slope: float = MAX_SLOPE_MB_PER_MIN,
                min_window_s: float = MIN_WINDOW_S) -> list[MemoryRow]:
    """``series``: (kind, name) -> (t_s, rss_bytes, cpu_pct) arrays of one process.

    Samples before ``warmup_s`` are left out (start-up allocates: imports, tables, JIT
    of the pipeline); a process needs 3 samples after it to count.
    """
    by_kind: dict[str, list[tuple[str, float, float, float, float, float]]] = {}
    span: dict[str, float] = {}
    for (kind, name), (t, rss, cpu) in series.items():
        t, rss, cpu = (np.asarray(a, dtype=np.float64) for a in (t, rss, cpu))
        if not t.size == rss.size == cpu.size:
            raise SoakStatsError(f"memory of {kind} {name}: {t.size} times, {rss.size} RSS, "
                                 f"{cpu.size} CPU samples")
        keep = t >= warmup_s
        if keep.sum() < 3:
            continue
        tk, rk = t[keep], rss[keep]
        by_kind.setdefault(kind, []).append(
            (name, rk[0] / 1e6, rk[-1] / 1e6, slope_mb_per_min(tk, rk),
             float(cpu.mean()), float(tk[-1] - tk[0])))
        span[kind] = max(span.get(kind, 0.0), float(tk[-1] - tk[0]))
    rows = []
    for kind in sorted(by_kind):
        procs = by_kind[kind]
        worst = max(procs, key=lambda p: p[3])
        slope = worst[3]
        if kind in EXEMPT_KINDS:
            verdict = "not judged"
        elif span[kind] < min_window_s:
            verdict = "too short"
        else:
            verdict = "growing" if slope > max_slope else "flat"
        rows.append(MemoryRow(
            kind=kind, processes=len(procs),
            start_mb=float(np.mean([p[1] for p in procs])),
            end_mb=float(np.mean([p[2] for p in procs])), slope_mb_per_min=slope,
            worst=worst[0], cpu_pct=float(np.mean([p[4] for p in procs])), verdict=verdict))
    return rows


@dataclass(frozen=True, slots=True, kw_only=True)
class DropRow:
    """A drop counter: where, how many, and why (or that nobody knows why)."""

    kind: str
    where: str
    count: int
    explained: bool
    reason: str


# switch statistics, per port and per switch: counter -> (explained, reason)
_PORT_COUNTERS = {
    "tail_drops": (True, "egress queue full (bursts)"),
    "rx_dropped": (False, "receive overrun: switch behind"),
    "tx_errors": (False, "transmit errors"),
}
_SWITCH_COUNTERS = {
    "pipeline_drops": (True, "the P4 program's own drops"),
    "tm_errors": (False, "traffic manager errors"),
    "rx_errors": (False, "receive errors"),
    "no_such_port": (False, "egress port does not exist"),
    "pipeline_errors": (False, "pipeline errors"),
}
_COLLECTOR_COUNTERS = {  # state-file key -> (kind, reason)
    "reports_lost": ("report seq gaps", "reports lost switch -> collector"),
    "socket_drops": ("collector socket", "kernel dropped: collector behind"),
    "listener_errors": ("collector listener", "HPCC/loss listener raised"),
    "agent_lost_batches": ("agent batches lost", "lost agent -> collector"),
    "agent_dropped": ("agent records dropped", "the agent's queue was full"),
}


def classify_drops(*, switch_stats: Mapping[str, Mapping[str, Any]],
                   wan: Mapping[str, Mapping[str, Mapping[str, int]]],
                   wan_loss: Mapping[str, float],
                   controller_losses: Iterable[Mapping[str, Any]],
                   collector: Mapping[str, Any]) -> list[DropRow]:
    """Every non-zero drop counter, explained or not.

    ``switch_stats``: switch -> its statistics file (``ports`` with ``tail_drops``...);
    ``wan``: link -> direction -> delay-line counters (``lost``, ``queue_drops``);
    ``wan_loss``: link -> configured mean loss; ``controller_losses``: the controller's
    loss map totals (``link`` "s1:3->s5:3", ``role``, ``lost``); ``collector``: the
    state file's ``collector`` section.
    """
    rows: list[DropRow] = []
    for sw in sorted(switch_stats):
        st = switch_stats[sw]
        for p in st.get("ports", []) or []:
            for key, (ok, why) in _PORT_COUNTERS.items():
                n = int(p.get(key) or 0)
                if n:
                    rows.append(DropRow(kind=f"switch {key.replace('_', ' ')}",
                                        where=f"{sw}/{p.get('ifname')}",
                                        count=n, explained=ok, reason=why))
        for key, (ok, why) in _SWITCH_COUNTERS.items():
            n = int(st.get(key) or 0)
            if n:
                rows.append(DropRow(kind=f"switch {key.replace('_', ' ')}", where=sw, count=n,
                                    explained=ok,
                                    reason=why))
    for link in sorted(wan):
        configured = float(wan_loss.get(link, 0.0))
        for direction, c in sorted(wan[link].items()):
            n = int(c.get("lost") or 0)
            if n:
                rows.append(DropRow(
                    kind="wan loss", where=f"{link} {direction}", count=n,
                    explained=configured > 0,
                    reason=(f"configured loss ({100 * configured:.2f} %)"
                            if configured > 0 else "WAN link configured lossless")))
            n = int(c.get("queue_drops") or 0)
            if n:
                rows.append(DropRow(kind="wan tail drops", where=f"{link} {direction}",
                                    count=n, explained=True,
                                    reason="WAN rate limiter queue full"))
    lossy = {_undirected(k) for k, v in wan_loss.items() if v > 0}
    for r in controller_losses:
        n = int(r.get("lost") or 0)
        if n <= 0:
            continue
        link = str(r.get("link"))
        ok = _undirected(link) in lossy
        rows.append(DropRow(kind="loss map", where=link, count=n, explained=ok,
                            reason="configured WAN loss" if ok else
                            f"{r.get('role', '?')} link configured lossless"))
    for key, (kind, why) in _COLLECTOR_COUNTERS.items():
        n = int(collector.get(key) or 0)
        if n:
            rows.append(DropRow(kind=kind, where="controller", count=n, explained=False,
                                reason=why))
    for reason, n in sorted((collector.get("malformed") or {}).items()):
        if int(n):
            rows.append(DropRow(kind="malformed", where=str(reason), count=int(n),
                                explained=False, reason="malformed telemetry"))
    n = int(collector.get("export_lines_rejected") or 0)
    if n:
        rows.append(DropRow(kind="export rejected", where="controller", count=n,
                            explained=False, reason="refused by the database"))
    return rows


def _undirected(link: str) -> str:
    """"s1:3->s5:3", "s5:3->s1:3" and "s1:3-s5:3" all name one cable."""
    a, _, b = link.replace("->", "-").partition("-")
    return "-".join(sorted((a, b)))


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportRow:
    measurement: str
    delivered: int      # lines the controller's exporter says the server acknowledged
    held: int           # points the server holds

    @property
    def missing(self) -> int:
        return self.delivered - self.held


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportCheck:
    rows: list[ExportRow] = field(default_factory=list)
    written: int = 0
    delivered: int = 0
    pending: int = 0     # still queued or spooled when the controller stopped

    @property
    def lost(self) -> int:
        return sum(max(r.missing, 0) for r in self.rows) + self.pending + max(
            self.written - self.delivered - self.pending, 0)

    @property
    def verdict(self) -> str:
        if self.delivered == 0:
            return "nothing exported"
        return "nothing lost" if self.lost == 0 else f"{self.lost} lines lost"

    @property
    def failed(self) -> bool:
        return self.verdict != "nothing lost"


def compare_export(*, delivered: Mapping[str, int], held: Mapping[str, int],
                   written: int, pending: int) -> ExportCheck:
    """Lines delivered per measurement (the controller's count) against points held (the
    server's count); ``written`` lines were handed to the exporter, ``pending`` of them
    were still queued or spooled at the end."""
    names = sorted(set(delivered) | set(held))
    rows = [ExportRow(measurement=m, delivered=int(delivered.get(m, 0)),
                      held=int(held.get(m, 0))) for m in names]
    return ExportCheck(rows=rows, written=int(written), delivered=sum(r.delivered for r in rows),
                       pending=int(pending))
