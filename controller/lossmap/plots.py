"""PNG figures of loss maps: links x time heat map and per-link burst plots.

Uses matplotlib's Agg canvas directly (no pyplot global state), so plotting is
safe from any thread and from processes without a display.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure

from controller.lossmap.burst import Cycles, GilbertElliottFit, run_histogram
from controller.lossmap.errors import LossInputError
from controller.lossmap.links import LinkLossMap, Source
from controller.lossmap.psn import FlowLossMap


def _save(fig: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(fig)
    fig.savefig(path, format="png", dpi=100)
    return path


def plot_heatmap(link_map: LinkLossMap | FlowLossMap, path: str | Path, *,
                 link_names: Sequence[str] | None = None, rate: bool = True,
                 title: str = "Packet loss per link") -> Path:
    """Heat map of loss rate (or lost packets) per row (links, or flows for a
    ``FlowLossMap``) and time bin (columns)."""
    n_rows = int(link_map.lost.shape[0])
    source = getattr(link_map, "source", None)
    names = [f"row {i}" for i in range(n_rows)] if link_names is None else list(link_names)
    if len(names) != n_rows:
        raise LossInputError(f"plot_heatmap: {len(names)} names for {n_rows} rows")
    data = link_map.loss_rate() if rate else link_map.lost.astype(float)
    if not rate:
        seen = (link_map.lost + link_map.delivered) > 0
        if source is not None:
            seen |= (source != Source.NONE)[:, None]
        data = np.where(seen, data, np.nan)
    labels = names if source is None else [f"{n} ({Source.NAMES[s]})"
                                           for n, s in zip(names, source, strict=True)]
    shown = data  # NaN: nothing seen (grey); 0: seen, no loss (under colour)
    fig = Figure(figsize=(10, 1.5 + 0.35 * n_rows))
    ax = fig.add_subplot(1, 1, 1)
    edges = link_map.bins.edges_s()
    positive = shown[np.isfinite(shown) & (shown > 0)]
    lo = float(positive.min()) if positive.size else 1e-6
    hi = float(positive.max()) if positive.size else 1.0
    norm = LogNorm(vmin=lo, vmax=max(hi, lo * 1.0001))
    cmap = colormaps["inferno_r"].with_extremes(under="#e8f5e9", bad="#bdbdbd")
    # zeros sit below vmin (drawn in the "under" colour) instead of vanishing on a log scale
    shown = np.where(shown == 0, lo / 10, shown)
    mesh = ax.pcolormesh(edges, np.arange(n_rows + 1), np.ma.masked_invalid(shown),
                         cmap=cmap, norm=norm, shading="flat")
    ax.set_yticks(np.arange(n_rows) + 0.5)
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(title)
    fig.colorbar(mesh, ax=ax, extend="min",
                 label=("loss rate" if rate else "packets lost")
                 + " (pale: no loss, grey: no data)")
    fig.tight_layout()
    return _save(fig, Path(path))


def plot_bursts(cycles: Cycles, path: str | Path, *, link_name: str,
                fit: GilbertElliottFit | None = None, max_len: int = 32) -> Path:
    """Burst-length and gap-length histograms of one link, with the fitted model."""
    fig = Figure(figsize=(10, 3.6))
    ax1 = fig.add_subplot(1, 2, 1)
    ax2 = fig.add_subplot(1, 2, 2)
    h = run_histogram(cycles.loss_len, max_len)
    ax1.bar(np.arange(1, max_len + 1), h[1:], color="tab:red")
    if cycles.loss_len.size:
        ax1.set_xlim(0.5, min(int(cycles.loss_len.max()), max_len) + 0.5)
    ax1.set_xlabel(f"burst length (packets, last bar >= {max_len})")
    ax1.set_ylabel("bursts")
    gaps = cycles.gap_len[cycles.gap_len > 0]
    if gaps.size:
        bins = np.unique(np.logspace(0, np.log10(gaps.max() + 1), 30).astype(int))
        ax2.hist(gaps, bins=bins.tolist(), color="tab:blue")
        ax2.set_xscale("log")
    ax2.set_xlabel("gap between bursts (packets delivered)")
    ax2.set_ylabel("gaps")
    title = f"{link_name}: {cycles.loss_len.size} bursts, {int(cycles.loss_len.sum())} lost"
    if fit is not None:
        title += (f"; GE p={fit.p.value:.3g} r={fit.r.value:.3g} "
                  f"loss-in-bad={fit.loss_in_bad.value:.3g} "
                  f"loss={fit.loss_rate.value:.3g} [{fit.loss_rate.low:.3g}, "
                  f"{fit.loss_rate.high:.3g}]")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return _save(fig, Path(path))
