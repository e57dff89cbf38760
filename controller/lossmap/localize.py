"""Place flow losses (PSN gaps) on links where the switches give no counters.

Per time bin:

1. *Explain away*: every monitored link's exact loss count is shared among the
   lossy flows crossing it, in proportion to their losses, and taken off those
   flows; what remains of a flow's losses (its *residual*) happened on links
   without counters.
2. A link is *exonerated* in a bin when some flow crossing it delivered at least
   ``min_clean_packets`` packets with (almost) no residual loss. The default, 300,
   is what it takes for a link losing 1 % to show a loss with 95 % probability
   (ln 0.05 / ln 0.99); lower loss rates need more packets per bin.
3. A flow's *candidates* are its unmonitored links that are not exonerated; a flow
   that lost packets although all of them were exonerated falls back to all its
   unmonitored links (exoneration is evidence, not proof).
4. Each candidate's *score* is the number of flows with residual loss naming it;
   a flow splits its residual over its candidates in proportion to
   score ** ``sharpen``, so a link shared by many lossy flows takes the losses
   rather than each flow's private links.

Monitored links keep their exact counts; unmonitored links get the votes.
Residual losses of a flow with no candidate are reported as unexplained.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.lossmap.errors import LossInputError, LossParameterError
from controller.lossmap.links import LinkLossMap, Source
from controller.lossmap.psn import FlowLossMap

_SLACK = 0.5
"""Residual losses below half a packet are rounding of the proportional split."""


def padded_paths(paths: npt.ArrayLike | list[list[int]], n_links: int) -> np.ndarray:
    """(flows x hops) link indices, -1 padded, from link lists (ragged or padded)."""
    if isinstance(paths, list) and paths and any(len(p) != len(paths[0]) for p in paths):
        width = max(len(p) for p in paths)
        paths = [list(p) + [-1] * (width - len(p)) for p in paths]
    p = np.atleast_2d(np.asarray(paths, dtype=np.int64))
    if p.size and (p.max() >= n_links or p.min() < -1):
        bad = int(p[(p >= n_links) | (p < -1)][0])
        raise LossInputError(f"paths: a path names link {bad}, outside 0..{n_links - 1}")
    return p


def incidence(paths: npt.ArrayLike | list[list[int]], n_links: int) -> np.ndarray:
    """(flows x links) bool matrix from paths given as link lists (-1 padded or ragged)."""
    p = padded_paths(paths, n_links)
    m = np.zeros((p.shape[0], n_links), dtype=bool)
    f, h = np.nonzero(p >= 0)
    m[f, p[f, h]] = True
    return m


@dataclass(slots=True, kw_only=True)
class Localized:
    """Result of ``localize``: the merged map plus the evidence behind the votes."""

    link_map: LinkLossMap
    votes: np.ndarray
    """(links x bins) residual flow losses voted onto each unmonitored link."""
    exonerated: np.ndarray
    """(links x bins) bool."""
    unexplained: np.ndarray
    """(bins,) residual flow losses that found no candidate link."""
    residual: np.ndarray
    """(flows x bins) flow losses not explained by monitored links."""


def localize(*, flows: FlowLossMap, paths: npt.ArrayLike | list[list[int]],
             links: LinkLossMap, min_clean_packets: int = 300,
             sharpen: float = 2.0) -> Localized:
    """Merge exact link counts with votes from flow losses for unmonitored links."""
    if min_clean_packets < 1:
        raise LossParameterError(f"localize: min_clean_packets = {min_clean_packets} < 1")
    if sharpen < 0:
        raise LossParameterError(f"localize: sharpen = {sharpen} is negative")
    if flows.bins != links.bins:
        raise LossInputError(f"localize: flow bins {flows.bins} differ from link bins "
                             f"{links.bins}")
    n_links = links.n_links
    p = padded_paths(paths, n_links)
    if p.shape[0] != flows.lost.shape[0]:
        raise LossInputError(f"localize: {p.shape[0]} paths for {flows.lost.shape[0]} flows")
    # work on (flow, hop, bin) so memory grows with path length, not with the link count
    valid = p >= 0
    link = np.where(valid, p, 0)
    n_bins = flows.lost.shape[1]

    fv, hv = np.nonzero(valid)
    cell = (link[fv, hv][:, None] * n_bins + np.arange(n_bins)[None, :]).ravel()

    def per_link(values: np.ndarray) -> np.ndarray:
        """Sum (flow, hop, bin) values onto (link, bin)."""
        w = np.asarray(values[fv, hv], dtype=np.float64).ravel()
        return np.bincount(cell, weights=w, minlength=n_links * n_bins).reshape(n_links, n_bins)

    known = links.source != Source.NONE
    lost_f = flows.lost                                                        # (F, B)
    # 1. explain away the exact counts of monitored links
    known_hop = (valid & known[link])[:, :, None]                              # (F, H, 1)
    k_lost = np.where(known[:, None], np.maximum(links.lost, 0.0), 0.0)        # (L, B)
    through = per_link(known_hop * lost_f[:, None, :])                         # (L, B)
    with np.errstate(invalid="ignore", divide="ignore"):
        per_loss = np.where(through > 0, k_lost / through, 0.0)               # (L, B)
    explained = (known_hop * per_loss[link]).sum(axis=1) * lost_f              # (F, B)
    residual = np.maximum(lost_f - explained, 0.0)
    # 2. exonerate links of flows whose losses are all explained (or that lost nothing)
    clean = (residual < _SLACK) & (flows.delivered >= min_clean_packets)
    exonerated = per_link(np.broadcast_to(clean[:, None, :], valid.shape + (n_bins,))) > 0
    # 3./4. vote the residual over unmonitored, non-exonerated links
    suspect = ~known[:, None] & ~exonerated                                    # (L, B)
    lossy = residual >= _SLACK                                                 # (F, B)
    cand = valid[:, :, None] & suspect[link]                                   # (F, H, B)
    score = per_link(cand & lossy[:, None, :])                                 # (L, B)
    w = cand * score[link] ** sharpen
    wsum = w.sum(axis=1)                                                       # (F, B)
    # exoneration is evidence, not proof: a flow that lost packets although all its
    # unmonitored links were exonerated votes over all of them instead
    stuck = lossy & (wsum == 0)
    if stuck.any():
        open_ = (valid & ~known[link])[:, :, None] & stuck[:, None, :]
        score_all = per_link(open_)
        w = np.where(stuck[:, None, :], open_ * score_all[link] ** sharpen, w)
        wsum = w.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        share = np.where(wsum[:, None, :] > 0, w / wsum[:, None, :], 0.0)
    votes = per_link(share * residual[:, None, :])
    unexplained = (residual * (wsum == 0) * lossy).sum(axis=0)
    on_path = np.zeros(n_links, dtype=bool)
    on_path[p[valid]] = True
    voted = ~known & on_path
    lost = np.where(voted[:, None], votes, links.lost)
    carried = per_link(np.broadcast_to(flows.delivered[:, None, :], valid.shape + (n_bins,)))
    delivered = np.where(voted[:, None], carried, links.delivered)
    source = np.where(voted, Source.VOTE, links.source).astype(np.int8)
    merged = LinkLossMap(bins=links.bins, lost=lost, delivered=delivered, source=source,
                         reordered=links.reordered)
    return Localized(link_map=merged, votes=votes, exonerated=exonerated,
                     unexplained=unexplained, residual=residual)
