"""What the mitigation acts on: findings, from the diagnosis and from the link loss map.

Why two sources: the diagnosis (``controller.diagnose``) names every kind of culprit
with a confidence and an onset but needs the ranks' collective logs and a slow
transfer; the switches' link sequence counters (polled each tick, the loss map's
source) show a lossy or dead fabric link on their own within a poll or two.  Both become the same
`Finding`, so the policy has one input and the evidence of each is kept for the log.
"""
from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Finding", "GrayLossRule", "SilenceRule", "findings_from_diagnosis", "findings_from_link_loss",
           "findings_from_silence", "loss_lower_bound"]


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
    source: str                       # "diagnosis" | "lossmap" (gray loss) | "counters" (dead link)
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
class GrayLossRule:
    """When a link direction's sequence counters name it lossy (gray loss).

    Per direction, over each window of the latest ``1 .. max_polls`` poll intervals,
    the loss rate weighted by packets (lost / (lost + delivered)) and its lower
    confidence bound (Wilson score, ``z`` standard errors, one-sided); the direction is
    named when, in some window, that bound reaches the threshold
    ``max(min_rate, noise_x * background)`` and at least ``min_lost`` packets were lost.
    The background is the pooled loss rate of every other direction over all the polls
    given (a loaded test bed loses a little everywhere; pooled by packets, a
    direction that carried a handful of packets cannot raise it, as the next-lossiest
    direction's own rate did).

    Why a bound and not "lossy at two polls": a 5 % loss over a poll of a thousand
    packets is certain at once, while 3 lost of 20 is not, whatever the rate says;
    the bound asks for as many polls as the counts need, and no more.  Why several
    windows: the poll that spans the onset is partly clean, and a longer window
    dilutes it further; the shortest window that is confident wins.  z = 3.9 holds a
    healthy direction (at the threshold or below) under 5e-5 per window judged.
    A dead link that comes back shows the packets it swallowed as one jump of its
    sequence; the poller keeps such a direction ``recovering`` and it is not judged.
    Confidence: the bound over twice the threshold (0.5 when just named, 1 at twice).
    """

    max_polls: int = 4
    min_rate: float = 0.01
    noise_x: float = 3.0
    z: float = 3.9
    min_lost: int = 5


def loss_lower_bound(lost: np.ndarray, total: np.ndarray, z: float) -> np.ndarray:
    """The Wilson score lower bound of a binomial rate ``lost / total`` (0 where
    ``total`` is 0): sound for small counts and rates near 0, where the normal
    approximation's bound goes below 0 or above the rate's truth."""
    lost, total = np.asarray(lost, dtype=float), np.asarray(total, dtype=float)
    n = np.maximum(total, 1.0)
    p = np.clip(lost / n, 0.0, 1.0)
    z2 = z * z
    centre = p + z2 / (2 * n)
    spread = z * np.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return np.where(total > 0, np.maximum(0.0, (centre - spread) / (1 + z2 / n)), 0.0)


def findings_from_link_loss(*, names: Sequence[str], lost: np.ndarray, delivered: np.ndarray,
                            interval_start_s: np.ndarray, rule: GrayLossRule = GrayLossRule(),
                            recovering: Collection[str] = ()) -> list[Finding]:
    """``gray_loss`` findings from the link sequence counters' latest poll intervals
    (rows: directed links ``names``; columns: intervals oldest first, the packets lost
    and delivered in each, negative where an end was not read; ``interval_start_s``:
    each interval's start, Unix s).  Directions in ``recovering`` are not judged."""
    out: list[Finding] = []
    n = len(names)
    if not n or lost.ndim != 2 or lost.shape != delivered.shape or lost.shape[0] != n \
            or lost.shape[1] == 0 or interval_start_s.shape != (lost.shape[1],):
        return out
    lo, de = np.maximum(lost, 0).astype(float), np.maximum(delivered, 0).astype(float)
    lo = np.where((lost < 0) | (delivered < 0), 0.0, lo)
    de = np.where((lost < 0) | (delivered < 0), 0.0, de)
    all_lost, all_tot = lo.sum(), lo.sum() + de.sum()
    own_lost, own_tot = lo.sum(axis=1), lo.sum(axis=1) + de.sum(axis=1)
    other_tot = all_tot - own_tot
    background = np.divide(all_lost - own_lost, other_tot, out=np.zeros(n), where=other_tot > 0)
    threshold = np.maximum(rule.min_rate, rule.noise_x * background)
    best = np.zeros(n)
    best_k = np.zeros(n, dtype=int)
    k_max = min(rule.max_polls, lo.shape[1])
    for k in range(1, k_max + 1):
        lk, tk = lo[:, -k:].sum(axis=1), lo[:, -k:].sum(axis=1) + de[:, -k:].sum(axis=1)
        lb = loss_lower_bound(lk, tk, rule.z)
        hit = (lb >= threshold) & (lk >= rule.min_lost) & (lb > best)
        best, best_k = np.where(hit, lb, best), np.where(hit, k, best_k)
    for i in np.flatnonzero(best_k):
        name = str(names[int(i)])
        if name in recovering:
            continue
        k = int(best_k[i])
        lk, dk = float(lo[i, -k:].sum()), float(de[i, -k:].sum())
        # the onset: the first of the run of lossy polls that ends at the latest one
        # (the confident window may be shorter: the poll spanning the onset is diluted)
        j = lo.shape[1] - 1
        while j > 0 and lo[i, j - 1] > 0:
            j -= 1
        out.append(Finding(kind="gray_loss", type="link", component=name,
                           confidence=float(min(1.0, best[i] / (2 * threshold[i]))),
                           onset=float(interval_start_s[j]) if lo[i, -1] > 0 else
                           float(interval_start_s[-k:][int(np.flatnonzero(lo[i, -k:] > 0)[0])]),
                           source="lossmap",
                           evidence={"lost": int(lk), "delivered": int(dk),
                                     "loss_rate": round(lk / (lk + dk), 4),
                                     "lower_bound": round(float(best[i]), 4),
                                     "threshold": round(float(threshold[i]), 4),
                                     "background": round(float(background[i]), 5), "polls": k}))
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
