"""What the mitigation acts on: findings, from the diagnosis and from the link loss map.

Why two sources: the diagnosis (``controller.diagnose``) names every kind of culprit
with a confidence and an onset but needs the ranks' collective logs and a slow
transfer; the loss map (the switches' link sequence counters, polled each tick) sees a
lossy or silent fabric link on its own within a bin or two.  Both become the same
`Finding`, so the policy has one input and the evidence of each is kept for the log.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Finding", "LossMapRule", "SilenceRule", "findings_from_diagnosis", "findings_from_lossmap",
           "findings_from_silence"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """A faulty component as a source names it (``component`` in the diagnosis' form:
    "s1:3->s5:3" for a directed link, "s3:2" for a switch port, "s3" for a switch,
    "h5" for a host, "2" for a rank)."""

    kind: str
    type: str
    component: str
    confidence: float
    onset: float | None
    source: str                       # "diagnosis" | "lossmap"
    evidence: Mapping[str, Any] = field(default_factory=dict)


def findings_from_diagnosis(diag: Mapping[str, Any] | None) -> list[Finding]:
    """The culprits of a diagnosis (``Diagnosis.as_dict()``, as ``LiveDiagnosis``
    publishes it); malformed rows are skipped (a half-written verdict is not an order)."""
    if not diag or not diag.get("fault"):
        return []
    out = []
    for c in diag.get("culprits") or []:
        try:
            out.append(Finding(kind=str(c["kind"]), type=str(c["type"]), component=str(c["component"]),
                               confidence=float(c["confidence"]),
                               onset=None if c.get("onset") is None else float(c["onset"]),
                               source="diagnosis", evidence=dict(c.get("evidence") or {})))
        except (KeyError, TypeError, ValueError):
            continue
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LossMapRule:
    """When the loss map alone names a link.

    Gray loss: over the last ``window_bins`` polled bins the direction lost at least
    ``min_lost`` packets at a rate of at least ``min_rate`` and ``noise_x`` times the
    next lossiest direction's (a loaded test bed loses a little everywhere), in at
    least ``lossy_bins`` of them (a gray link loses at every poll; a dead link that
    comes back shows the packets it swallowed as one jump of its sequence, once);
    confidence rises with the rate up to 1 at ``2 * min_rate``.
    The loss map names no dead link: a link that delivers nothing may be dead, or
    rerouted, or idle between a job's steps; `SilenceRule` tells them apart from both
    ends' sequence registers."""

    window_bins: int = 2
    lossy_bins: int = 2
    min_rate: float = 0.01
    min_lost: int = 10
    noise_x: float = 3.0


def findings_from_lossmap(*, names: Sequence[str], links: Sequence[str], lost: np.ndarray,
                          delivered: np.ndarray, bin_start_s: np.ndarray, bin_s: float,
                          rule: LossMapRule = LossMapRule(), recovering: Collection[str] = ()
                          ) -> list[Finding]:
    """Findings from the bins of a link loss map (rows: directed links named ``names``,
    the undirected ``links`` they belong to; columns: bins up to the latest poll, oldest
    first, starting at ``bin_start_s`` (Unix s)); bins without any count anywhere (no
    poll in them) are skipped, so the rule's bins are the polls'.  Directions in
    ``recovering`` (a dead link that came back: its first packet shows everything it
    swallowed as one sequence jump) are not named for gray loss."""
    out: list[Finding] = []
    if lost.ndim == 2 and len(names):
        # bins no poll touched are no evidence: the controller reads the counters once a
        # tick, which on a loaded machine is 3-6 s apart, so most 1 s bins hold nothing
        # and each poll's counts land in one bin; "the last two bins" must mean the last
        # two polls, or a busy link looks silent between polls and a lossy one is out of
        # the window before its bin closes
        seen = np.flatnonzero((lost + delivered).sum(axis=0) > 0)
        lost, delivered, bin_start_s = lost[:, seen], delivered[:, seen], bin_start_s[seen]
    n_bins = lost.shape[1] if lost.ndim == 2 else 0
    if not len(names) or n_bins == 0:
        return out
    w = min(rule.window_bins, n_bins)
    lw, dw = lost[:, -w:].sum(axis=1), delivered[:, -w:].sum(axis=1)
    tot = lw + dw
    rate = np.divide(lw, tot, out=np.zeros(len(names)), where=tot > 0)
    for i, name in enumerate(names):
        if name in recovering:
            continue
        others = np.delete(rate, i)
        floor = float(others.max()) if others.size else 0.0
        if lw[i] >= rule.min_lost and rate[i] >= rule.min_rate and rate[i] >= rule.noise_x * floor \
                and int((lost[i, -w:] > 0).sum()) >= min(rule.lossy_bins, w):
            cols = np.flatnonzero(lost[i, -w:] > 0)
            onset = float(bin_start_s[-w:][cols[0]]) if cols.size else None
            out.append(Finding(kind="gray_loss", type="link", component=name,
                               confidence=float(min(1.0, rate[i] / (2 * rule.min_rate))), onset=onset,
                               source="lossmap",
                               evidence={"lost": int(lw[i]), "delivered": int(dw[i]),
                                         "loss_rate": round(float(rate[i]), 4),
                                         "next_lossiest_rate": round(floor, 4), "bins": w}))
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class SilenceRule:
    """When a link direction is dead by its two ends' link sequence registers: in the
    latest interval between link polls its upstream egress stamped at least
    ``min_sent`` packets and the sequence its downstream ingress expects did not move
    by a confirming read made after (`LinkPoller.silence`: a packet stamped in the
    interval has surely arrived by then).

    Why this and not the loss map: a dead link shows no loss (a sequence gap is seen
    only when a later packet arrives), and when a ring all-reduce hangs on it every
    other link falls silent too; but the stuck sender keeps retransmitting (its
    timeout backs off from 30 ms: a dozen packets in the first two seconds) and those
    are stamped leaving the upstream switch and never arrive.  Why not silence alone
    (nothing delivered for a while): a reroute, or a job between steps, silences a
    healthy link too.  A link at 5 % loss passes one of ``min_sent`` packets with
    probability 1 - 0.05 ** min_sent."""

    min_sent: int = 3
    confidence: float = 0.9


def findings_from_silence(*, names: Sequence[str], sent: np.ndarray, arrived: np.ndarray,
                          since_s: float | None, rule: SilenceRule = SilenceRule()) -> list[Finding]:
    """``link_down`` findings from the latest interval between link polls (per directed
    link ``names``: packets stamped upstream, how far the downstream expected sequence
    moved by the confirming read, -1: no evidence), which began at ``since_s``."""
    out: list[Finding] = []
    if not len(names) or sent.shape != (len(names),) or arrived.shape != (len(names),):
        return out
    dead = (sent >= rule.min_sent) & (arrived == 0)
    for i in np.flatnonzero(dead):
        out.append(Finding(kind="link_down", type="link", component=str(names[int(i)]),
                           confidence=rule.confidence, onset=since_s, source="counters",
                           evidence={"stamped": int(sent[i]), "arrived": 0}))
    return out
