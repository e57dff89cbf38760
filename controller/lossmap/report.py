"""Text tables of loss maps for terminals (under 80 columns), e.g. ``show losses``."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from controller.lossmap.burst import GilbertElliottFit
from controller.lossmap.errors import LossInputError
from controller.lossmap.links import LinkLossMap, Source, wilson_interval
from controller.lossmap.policy import PathFec


def link_table(link_map: LinkLossMap, names: Sequence[str], *,
               fits: dict[int, GilbertElliottFit] | None = None,
               truth: npt.ArrayLike | None = None) -> list[str]:
    """One line per link over the whole window: source, lost, delivered, loss rate
    with its 95 % Wilson interval, and the burst model where ``fits`` has one."""
    if len(names) != link_map.n_links:
        raise LossInputError(f"link_table: {len(names)} names for {link_map.n_links} links")
    lost = link_map.lost.sum(axis=1)
    deliv = link_map.delivered.sum(axis=1)
    lo, hi = wilson_interval(np.maximum(lost, 0), lost + deliv)
    head = f"{'link':<12} {'source':<7} {'lost':>7} {'deliv':>9} {'loss %':>7} {'95 % CI':>15}"
    if truth is not None:
        head += f" {'true':>6}"
    true = None if truth is None else np.asarray(truth, dtype=np.int64)
    lines = [head]
    for i, name in enumerate(names):
        seen = lost[i] + deliv[i] > 0
        rate = f"{100 * lost[i] / (lost[i] + deliv[i]):7.3f}" if seen else f"{'-':>7}"
        ci = f"{100 * lo[i]:.3f}-{100 * hi[i]:.3f}" if seen else ""
        line = (f"{name[:12]:<12} {Source.NAMES[link_map.source[i]]:<7} {lost[i]:7.0f} "
                f"{deliv[i]:9.0f} {rate} {ci:>15}")
        if true is not None:
            line += f" {int(true[i]):6d}"
        lines.append(line.rstrip())
        if fits and i in fits:
            f = fits[i]
            lines.append(f"{'':12}   bursts {f.bursts}, mean {f.mean_burst_len:.2f} pkts; "
                         f"GE p={f.p.value:.4f} r={f.r.value:.3f} bad={f.loss_in_bad.value:.2f}")
    return lines


def fec_table(fec: PathFec, names: Sequence[str]) -> list[str]:
    """One line per flow: raw loss and the chosen (k, m) / retransmission."""
    if len(names) != fec.fec_k.size:
        raise LossInputError(f"fec_table: {len(names)} names for {fec.fec_k.size} flows")
    lines = [f"{'flow':<16} {'raw loss %':>10} {'FEC':>12} {'residual':>10}  retransmit"]
    for j, name in enumerate(names):
        what = "none" if fec.fec_k[j] == 0 else f"k={fec.fec_k[j]} m={fec.fec_m[j]}"
        lines.append(f"{name[:16]:<16} {100 * fec.raw_loss[j]:10.3f} {what:>12} "
                     f"{fec.residual_loss[j]:10.2e}  {'yes' if fec.retransmit[j] else 'no'}")
    return lines


def _recent_counts(lost: np.ndarray, deliv: np.ndarray, recent_bins: int,
                   window_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """Per link, lost and delivered summed over its last ``recent_bins`` bins that carry
    packets among the last ``window_bins``: a link's counts arrive when its next counter
    sample or report does, so the newest bins are often still empty, and "the last two
    bins" alone would say "no data" for a link that is losing right now."""
    lo, de = lost[:, -window_bins:], deliv[:, -window_bins:]
    has = (lo + de) > 0
    # rank of each bin with packets, counted from the newest (1 = newest)
    from_newest = np.cumsum(has[:, ::-1], axis=1)[:, ::-1]
    keep = has & (from_newest <= recent_bins)
    return (lo * keep).sum(axis=1), (de * keep).sum(axis=1)


def lossmap_section(link_map: LinkLossMap, names: Sequence[str], *, now_ns: int,
                    keep_bins: int = 60, recent_bins: int = 2,
                    recent_window_bins: int = 8) -> dict[str, object]:
    """The loss map as the controller's state file carries it (the live view and the
    alerts read it): per link the loss rate with its 95 % Wilson interval over the
    kept window, the recent rate (over the link's last ``recent_bins`` bins with packets
    among the ``recent_window_bins`` up to ``now_ns``: what an alert reacts to, within
    two samples of the onset; None once a link has carried nothing that long) and the
    lost/delivered counts per bin.

    Only the ``keep_bins`` bins up to ``now_ns`` are kept so the state file stays small
    (early in a run the map's window also holds bins still in the future)."""
    if len(names) != link_map.n_links:
        raise LossInputError(f"lossmap_section: {len(names)} names for {link_map.n_links} links")
    b = link_map.bins
    now_idx = min(max((now_ns - b.start_ns) // b.bin_ns, 0), b.n_bins - 1)
    first = max(0, now_idx - keep_bins + 1)
    lost = np.maximum(link_map.lost[:, first:now_idx + 1], 0)
    deliv = np.maximum(link_map.delivered[:, first:now_idx + 1], 0)
    tot_l, tot_d = lost.sum(axis=1), deliv.sum(axis=1)
    lo, hi = wilson_interval(tot_l, tot_l + tot_d)
    rl, rd = _recent_counts(lost, deliv, recent_bins, max(recent_window_bins, recent_bins))

    def rate(lv: np.ndarray, dv: np.ndarray) -> list[float | None]:
        n = lv + dv
        return [None if n[i] <= 0 else float(lv[i] / n[i]) for i in range(len(n))]

    return {"links": list(names), "bin_s": b.bin_ns / 1e9,
            "start_unix_s": (b.start_ns + first * b.bin_ns) / 1e9,
            "rate": rate(tot_l, tot_d), "recent_rate": rate(rl, rd),
            "ci95": [None if tot_l[i] + tot_d[i] <= 0 else [float(lo[i]), float(hi[i])]
                     for i in range(len(names))],
            "lost": lost.astype(np.int64).tolist(), "delivered": deliv.astype(np.int64).tolist()}
