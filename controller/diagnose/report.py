"""The diagnosis as text, as the ``diagnosis`` key of summary.json, and as a plot.

The plot puts the collective on the left (one row per rank, each transfer a bar from
start to end coloured by how many times its pair's baseline it took; hung transfers
in black) and the top culprit's telemetry on the right on the same time axis (loss
rate of a link, queue of a port, late steps of a rank), with the onset marked, so a
reader sees the slowdown and its cause line up.
"""
from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from common.files import write_json_atomic
from controller.diagnose.engine import Culprit, Diagnosis
from controller.diagnose.evidence import Evidence

__all__ = ["format_diagnosis", "plot_diagnosis", "write_summary"]


def _t(t: float | None) -> str:
    if not t:   # None, or 0: logs without timestamps
        return "-"
    try:
        return datetime.fromtimestamp(t, UTC).strftime("%H:%M:%S.%f")[:-3]
    except (OverflowError, OSError, ValueError):   # no time a clock could show
        return "-"


def _evidence_text(c: Culprit) -> str:
    parts = []
    for k, v in c.evidence.items():
        if v in (None, [], {}) or k in ("role",):
            continue
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def format_diagnosis(d: Diagnosis, *, top: int = 5) -> str:
    """Human-readable ranking (or "no fault"), one culprit per line plus its evidence."""
    pairs = " " + ", ".join(f"{a}->{b}" for a, b in d.slow_pairs) if d.slow_pairs else ""
    head = (f"diagnosis at {_t(d.at)} UTC: {d.transfers} transfers, "
            f"{len(d.slow_pairs)} slow rank pair(s){pairs}, "
            f"late ranks {', '.join(map(str, d.late_ranks)) or 'none'}")
    for comm, info in sorted(d.collective.items()):
        facts = ", ".join(f"{k}={v}" for k, v in info.items() if k not in ("ranks", "last_seq"))
        ranks = f"ranks {info['ranks']}" + (", " if facts else "") if "ranks" in info else ""
        head += f"\ncollective {comm}: {ranks}{facts}"
    if not d.culprits:
        return head + ("\nno fault: no slow or hung transfer, no late rank, no telemetry "
                       "anomaly, no hang or mismatch in the library logs")
    lines = [head, f"{'#':>2} {'component':<24} {'kind':<20} {'conf':>5}  onset (UTC)"]
    for i, c in enumerate(d.culprits[:top], 1):
        lines.append(f"{i:>2} {c.type + ' ' + c.component:<24} {c.kind:<20} "
                     f"{c.confidence:5.2f}  {_t(c.onset)}")
        lines.append(f"   evidence: {_evidence_text(c)}")
    return "\n".join(lines)


def write_summary(out_dir: str | os.PathLike[str], d: Diagnosis) -> Path:
    """Put the diagnosis under ``diagnosis`` in OUT/summary.json (other keys kept),
    replacing the file atomically."""
    path = Path(out_dir) / "summary.json"
    data: dict = {}
    if path.is_file():
        try:
            data = json.loads(path.read_text())
        except ValueError:
            data = {}
        if not isinstance(data, dict):
            data = {}
    data["diagnosis"] = d.as_dict()
    write_json_atomic(path, data)
    return path


def _culprit_series(ev: Evidence, d: Diagnosis, c: Culprit
                    ) -> tuple[str, list[float], list[float]]:
    tel = ev.telemetry
    if c.type == "link" and c.kind in ("gray_loss", "link_down") and c.component in tel.link_loss:
        s = tel.link_loss[c.component]
        return (f"loss rate {c.component}", [x.t for x in s],
                [x.lost / max(1, x.lost + x.delivered) for x in s])
    if c.type in ("link", "port"):
        near = c.component.split("->")[0]
        sw, _, port = near.partition(":")
        key = (sw, int(port)) if port.isdigit() else None
        if key in tel.port_drops and c.kind == "tiny_queue":
            dr = tel.port_drops[key]
            return f"tail drops {near}", [t for t, _ in dr], [float(n) for _, n in dr]
        if key in tel.ports:
            ps = tel.ports[key]
            return f"queue (pkts) {near}", [x.t for x in ps], [float(x.qlen_pkts) for x in ps]
    if c.type == "rank" and d.view is not None and int(c.component) in d.view.late:
        pts = d.view.late[int(c.component)]
        return f"late steps of rank {c.component} (s)", [t for t, _ in pts], [g for _, g in pts]
    return f"{c.type} {c.component}: no telemetry", [], []


def plot_diagnosis(ev: Evidence, d: Diagnosis, path: str | os.PathLike[str]) -> Path:
    """Ranks x time with the top culprit's telemetry beside it (PNG)."""
    fig = Figure(figsize=(12, 4.5))
    ax, ax2 = fig.subplots(1, 2, gridspec_kw={"width_ratios": [3, 2]})
    t0 = min((r.start for r in ev.records), default=0.0)
    cmap, norm = colormaps["RdYlGn_r"], Normalize(1.0, 4.0)
    view = d.view
    for rank, a, b, ratio in (view.steps if view else []):
        hung = not np.isfinite(ratio)
        ax.barh(rank, b - a, left=a - t0, height=0.6,
                color="black" if hung else cmap(norm(ratio)), edgecolor="none")
    ax.set_xlabel("time since the first transfer (s)")
    ax.set_ylabel("rank (sends)")
    ax.set_title("transfers: colour = duration / pair baseline (black: hung)")
    ax.set_yticks(sorted({r for r, *_ in (view.steps if view else [])}))
    ax.invert_yaxis()
    top = d.culprits[0] if d.culprits else None
    if top is not None:
        label, ts, ys = _culprit_series(ev, d, top)
        if ts:
            ax2.plot([t - t0 for t in ts], ys, drawstyle="steps-post")
        ax2.set_title(f"{top.type} {top.component}: {top.kind} ({top.confidence:.2f})")
        ax2.set_ylabel(label)
        if top.onset is not None:
            for a in (ax, ax2):
                a.axvline(top.onset - t0, color="red", linestyle="--", linewidth=1)
    else:
        ax2.set_title("no fault")
    ax2.set_xlabel("time since the first transfer (s)")
    if ax.get_xlim():
        ax2.set_xlim(ax.get_xlim())
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(p, format="png", dpi=90)
    return p
