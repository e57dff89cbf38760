"""PNG figures of an experiment: queue length, rate convergence, FCT CDF, loss heat map.

Pure functions from arrays/rows to a file (matplotlib's Agg canvas, no display), so they
run in CI and on a results folder after the fact (``python -m mininet_topos plot DIR``).
The loss heat map is :func:`controller.lossmap.plot_heatmap`.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from .errors import RunError

__all__ = ["plot_bars", "plot_fct_cdf", "plot_queues", "plot_rates"]


def _save(fig: Figure, path: Path) -> Path:
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def plot_queues(series: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | Path, *,
                top: int = 6, bound_pkts: float | None = None,
                title: str = "Egress queue length") -> Path:
    """Queue length (packets) over time of the ``top`` deepest queues of ``series``
    (name -> (t_s, pkts)); ``bound_pkts`` draws the queue limit."""
    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot(1, 1, 1)
    ranked = sorted(series.items(), key=lambda kv: -float(np.max(kv[1][1], initial=0)))
    for name, (t, q) in ranked[:top]:
        if len(t) != len(q):
            raise RunError(f"plot_queues: {name}: {len(t)} times for {len(q)} values")
        ax.step(t, q, where="post", label=name)
    if bound_pkts is not None:
        ax.axhline(bound_pkts, color="grey", linestyle="--", label="queue limit")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("queue (packets)")
    ax.set_title(title)
    if ranked:
        ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_rates(series: Mapping[str, tuple[np.ndarray, np.ndarray]], path: str | Path, *,
               title: str = "Rate per flow", ylabel: str = "rate (Mbit/s)") -> Path:
    """Rates (bit/s) over time, one line per name (flow or port); shown in Mbit/s."""
    fig = Figure(figsize=(8, 4))
    ax = fig.add_subplot(1, 1, 1)
    for name, (t, r) in sorted(series.items()):
        if len(t) != len(r):
            raise RunError(f"plot_rates: {name}: {len(t)} times for {len(r)} values")
        ax.plot(t, np.asarray(r, dtype=float) / 1e6, label=name, linewidth=1)
    ax.set_xlabel("time (s)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if 0 < len(series) <= 12:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_fct_cdf(fcts: Mapping[str, Sequence[float]], path: str | Path, *,
                 title: str = "Flow completion time CDF") -> Path:
    """Empirical CDF of flow (message) completion times, one line per label (variant)."""
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot(1, 1, 1)
    for label, vals in fcts.items():
        x = np.sort(np.asarray(vals, dtype=float))
        if x.size == 0:
            continue
        if not np.all(np.isfinite(x)) or x[0] < 0:
            raise RunError(f"plot_fct_cdf: {label}: completion times must be finite and >= 0")
        ax.step(x * 1e3, np.arange(1, x.size + 1) / x.size, where="post", label=label)
    ax.set_xlabel("completion time (ms)")
    ax.set_ylabel("CDF")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_bars(values: Mapping[str, float], path: str | Path, *, ylabel: str,
              title: str, limit: float | None = None) -> Path:
    """One bar per variant (e.g. goodput of each recovery mode and loss rate);
    ``limit`` draws the reachable maximum."""
    fig = Figure(figsize=(max(5.0, 0.8 * len(values) + 2), 4))
    ax = fig.add_subplot(1, 1, 1)
    names = list(values)
    vals = [float(values[n]) for n in names]
    if not all(np.isfinite(vals)):
        raise RunError(f"plot_bars: {title}: values must be finite: {dict(values)}")
    ax.bar(range(len(names)), vals, color="#4c72b0")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=30, ha="right", fontsize=8)
    if limit is not None:
        ax.axhline(limit, color="grey", linestyle="--", label="limit")
        ax.legend(fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    fig.tight_layout()
    return _save(fig, Path(path))
