"""The soak's outputs: CSV time series, the RSS plot, ``report.json`` and printed lines.

Kept apart from the run so the report can be rebuilt and tested from samples alone.
"""
from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .soak_procs import KINDS, ProcSample
from .soak_stats import (
    MAX_SLOPE_MB_PER_MIN,
    DropRow,
    ExportCheck,
    MemoryRow,
    memory_rows,
)

__all__ = ["QUEUE_KEYS", "format_report", "process_series", "write_outputs"]

#: state-file ``collector`` keys sampled over time (queue depths and drop counters)
QUEUE_KEYS = ("export_buffered_lines", "export_queued_batches", "export_queued_lines",
              "export_spool_batches", "export_spool_lines", "export_spool_bytes",
              "export_lines_written", "export_lines_delivered", "export_send_failures",
              "socket_drops", "reports_lost", "agent_lost_batches", "agent_dropped",
              "host_records", "flows")


def process_series(samples: Sequence[ProcSample]
                   ) -> dict[tuple[str, str], tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """(kind, "name pid") -> (t_s, rss_bytes, cpu_pct) arrays, one entry per process."""
    by: dict[tuple[str, str], list[ProcSample]] = {}
    for s in samples:
        by.setdefault((s.kind, f"{s.name} {s.pid}"), []).append(s)
    return {k: (np.array([s.t_s for s in v]), np.array([s.rss_bytes for s in v], np.float64),
                np.array([s.cpu_pct for s in v])) for k, v in by.items()}


def _kind_order(kind: str) -> int:
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def write_outputs(out: Path, *, samples: Sequence[ProcSample],
                  queues: Sequence[dict[str, Any]], report: dict[str, Any]) -> dict[str, Path]:
    """``processes.csv``, ``queues.csv``, ``rss.png`` and ``report.json`` under ``out``
    (the report gets their paths under ``files``)."""
    out.mkdir(parents=True, exist_ok=True)
    files = {"processes": out / "processes.csv", "queues": out / "queues.csv",
             "rss_plot": out / "rss.png", "report": out / "report.json"}
    with files["processes"].open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t_s", "pid", "kind", "name", "rss_mb", "cpu_pct"])
        for s in samples:
            w.writerow([f"{s.t_s:.2f}", s.pid, s.kind, s.name, f"{s.rss_bytes / 1e6:.3f}",
                        f"{s.cpu_pct:.1f}"])
    with files["queues"].open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["t_s", *QUEUE_KEYS])
        for q in queues:
            w.writerow([f"{q['t_s']:.2f}", *(q.get(k, "") for k in QUEUE_KEYS)])
    _plot_rss(files["rss_plot"], samples, queues, warmup_s=float(report.get("warmup_s", 0.0)))
    report["files"] = {k: str(v) for k, v in files.items()}
    files["report"].write_text(json.dumps(report, indent=1, default=str) + "\n")
    return files


def _plot_rss(path: Path, samples: Sequence[ProcSample], queues: Sequence[dict[str, Any]], *,
              warmup_s: float) -> None:
    """RSS of every process over time (one colour per kind) above the controller's export
    backlog (lines buffered, queued and spooled)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = process_series(samples)
    kinds = sorted({k for k, _ in series}, key=_kind_order)
    colours = {k: plt.get_cmap("tab10")(i % 10) for i, k in enumerate(kinds)}
    fig, (ax, axq) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 1]})
    labelled: set[str] = set()
    for (kind, _name), (t, rss, _) in sorted(series.items(), key=lambda kv: _kind_order(kv[0][0])):
        ax.plot(t / 60.0, rss / 1e6, color=colours[kind], lw=1,
                label=None if kind in labelled else kind)
        labelled.add(kind)
    if warmup_s > 0:
        ax.axvline(warmup_s / 60.0, color="grey", ls=":", lw=1, label="end of warm-up")
    ax.set_ylabel("RSS (MB)")
    ax.set_title("soak: resident memory of every test-bed process")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8, ncol=2)
    tq = np.array([float(q["t_s"]) for q in queues]) / 60.0
    for key, label in (("export_buffered_lines", "buffered"), ("export_queued_lines", "queued"),
                       ("export_spool_lines", "spooled")):
        axq.plot(tq, [int(q.get(key) or 0) for q in queues], lw=1, label=label)
    axq.set_ylabel("export lines\nwaiting")
    axq.set_xlabel("time (min)")
    axq.grid(alpha=0.3)
    axq.legend(loc="upper left", fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def memory_table(samples: Sequence[ProcSample], *, warmup_s: float,
                 max_slope: float = MAX_SLOPE_MB_PER_MIN) -> list[MemoryRow]:
    rows = memory_rows(process_series(samples), warmup_s=warmup_s, max_slope=max_slope)
    return sorted(rows, key=lambda r: _kind_order(r.kind))


def report_dict(*, minutes: float, warmup_s: float, max_slope: float, memory: list[MemoryRow],
                drops: list[DropRow], export: ExportCheck, queues_max: dict[str, int],
                extra: dict[str, Any]) -> dict[str, Any]:
    """The machine-readable report (``report.json``); ``ok`` decides the exit status."""
    mem_fail = [r.kind for r in memory if r.failed]
    unexplained = [d for d in drops if not d.explained]
    return {
        "minutes": minutes, "warmup_s": warmup_s, "max_slope_mb_per_min": max_slope,
        "memory": [asdict(r) for r in memory],
        "memory_verdict": "growing: " + ", ".join(mem_fail) if mem_fail else "flat",
        "drops": [asdict(d) for d in drops],
        "unexplained_drops": sum(d.count for d in unexplained),
        "export": {"verdict": export.verdict, "written": export.written,
                   "delivered": export.delivered, "pending": export.pending,
                   "lost": export.lost,
                   "measurements": [{"measurement": r.measurement, "delivered": r.delivered,
                                     "held": r.held} for r in export.rows]},
        "queues_max": queues_max,
        "ok": not mem_fail and not unexplained and not export.failed,
        **extra,
    }


def format_report(rep: dict[str, Any]) -> list[str]:
    """Lines under 100 columns: memory per kind, drops, export, verdict."""
    head = (f"soak: {rep['minutes']:g} min of the demo workload; memory judged after "
            f"{rep['warmup_s']:g} s warm-up, limit {rep['max_slope_mb_per_min']:g} MB/min "
            "per process")
    lines = [head]
    lines.append(f"{'kind':<11}{'procs':>5}{'start MB':>10}{'end MB':>9}{'MB/min':>9}"
                 f"{'CPU %':>7}  verdict (worst process)")
    for r in rep["memory"]:
        lines.append(f"{r['kind']:<11}{r['processes']:>5}{r['start_mb']:>10.1f}"
                     f"{r['end_mb']:>9.1f}{r['slope_mb_per_min']:>+9.3f}{r['cpu_pct']:>7.1f}  "
                     f"{r['verdict']} ({r['worst']})")
    lines.append(f"memory: {rep['memory_verdict']}")
    q = rep.get("queues_max", {})
    lines.append("export queues (max over the run): buffer "
                 f"{q.get('export_buffered_lines', '-')} lines, queued "
                 f"{q.get('export_queued_batches', '-')} batches, spool "
                 f"{q.get('export_spool_batches', '-')} batches / "
                 f"{q.get('export_spool_bytes', '-')} B")
    lines.append(f"  send failures (retried) {q.get('export_send_failures', '-')}, collector "
                 f"socket drops {q.get('socket_drops', '-')}, agent drops "
                 f"{q.get('agent_dropped', '-')}")
    lines.append("drops (by kind; places in report.json):" if rep["drops"] else "drops: none")
    groups: dict[tuple[str, bool, str], list[dict[str, Any]]] = {}
    for d in rep["drops"]:
        groups.setdefault((d["kind"], d["explained"], d["reason"]), []).append(d)
    for (kind, explained, reason), ds in groups.items():
        top = max(ds, key=lambda d: d["count"])
        where = top["where"] if len(ds) == 1 else f"{len(ds)} places, top {top['where']}"
        tag = "explained" if explained else "UNEXPLAINED"
        lines.append(f"  {kind:<23}{sum(d['count'] for d in ds):>8}  {tag}: {reason} ({where})")
    sent = int(rep.get("switch_tx_packets") or 0)
    tail = sum(d["count"] for d in rep["drops"] if d["kind"] == "switch tail drops")
    if sent:
        lines.append(f"  (switch ports sent {sent} packets; tail drops "
                     f"{100 * tail / (sent + tail):.2f} % of what reached their queues)")
    out = rep.get("outage")
    if out:
        lines.append(f"outage: influxd down from {out['stopped_at_s'] or 0:.0f} s to "
                     f"{out['restarted_at_s'] or 0:.0f} s; the spool peaked at "
                     f"{q.get('export_spool_batches', 0)} batches, "
                     f"{q.get('export_spool_lines', 0)} lines")
    ex = rep["export"]
    lines.append(f"export: {ex['written']} lines written, {ex['delivered']} delivered, "
                 f"{ex['pending']} pending at stop -> {ex['verdict']}")
    for m in ex["measurements"]:
        diff = m["delivered"] - m["held"]
        lines.append(f"  {m['measurement']:<16} delivered {m['delivered']:>8}  held "
                     f"{m['held']:>8}  {'ok' if diff == 0 else f'missing {diff}'}")
    lines.append("soak: PASS" if rep["ok"] else "soak: FAIL")
    return lines
