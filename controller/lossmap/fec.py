"""Per-path FEC / retransmission policy from the loss model.

A block is k data + m repair packets of an MDS code (e.g. Reed-Solomon): it
decodes when at most m of its n = k + m packets are lost. With K the number of
losses in a block, the *residual* loss is the expected fraction of packets the
code cannot restore, sum_{j > m} P(K = j) j / n (a failed block loses its lost
data packets; data and repair packets are equally likely to be lost).

P(K = j) comes from the path's loss model: independent losses (binomial) or a
Gilbert-Elliott chain per link, combined along the path into one chain whose
states are the links' joint states (a packet is lost if any link drops it).
The policy picks, among allowed block sizes k, the smallest m meeting the
target residual loss and then the lowest overhead m / k (ties: smaller k, less
decoding delay). A path the code cannot bring under target is flagged for
retransmission (selective repeat) on top of the strongest allowed code.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from controller.lossmap.errors import LossParameterError

MAX_BLOCK = 1024


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkModel:
    """Loss model of one link: Gilbert-Elliott with loss-free Good state.

    ``p`` = 0 never leaves Good (lossless); p = 1, r = 0 stays in Bad, where
    ``loss_in_bad`` is then an independent (Bernoulli) loss rate."""

    p: float
    r: float
    loss_in_bad: float = 1.0

    def __post_init__(self) -> None:
        if not 0 <= self.p <= 1:
            raise LossParameterError(f"LinkModel.p = {self.p} is outside [0, 1]")
        if not 0 <= self.r <= 1 or self.p + self.r == 0:
            raise LossParameterError(f"LinkModel.r = {self.r} is outside [0, 1] "
                                     "(or p and r are both 0)")
        if not 0 <= self.loss_in_bad <= 1:
            raise LossParameterError(f"LinkModel.loss_in_bad = {self.loss_in_bad} not in [0,1]")

    @classmethod
    def bernoulli(cls, loss_rate: float) -> LinkModel:
        """Independent losses at ``loss_rate``: always in Bad."""
        if not 0 <= loss_rate <= 1:
            raise LossParameterError(f"LinkModel.bernoulli: loss_rate = {loss_rate} not in [0,1]")
        return cls(p=1.0, r=0.0, loss_in_bad=loss_rate)

    @property
    def loss_rate(self) -> float:
        return 0.0 if self.p == 0 else self.p / (self.p + self.r) * self.loss_in_bad


def _path_chain(links: Sequence[LinkModel]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Joint chain of independent links: (transition S x S, stationary S, loss prob S)."""
    trans = np.ones((1, 1))
    pi = np.ones(1)
    loss_ok = np.ones(1)  # probability a packet survives, per joint state
    for lm in links:
        t = np.array([[1 - lm.p, lm.p], [lm.r, 1 - lm.r]])
        tot = lm.p + lm.r
        s = np.array([1.0, 0.0]) if lm.p == 0 else np.array([lm.r / tot, lm.p / tot])
        trans = np.kron(trans, t)
        pi = np.kron(pi, s)
        loss_ok = np.kron(loss_ok, np.array([1.0, 1.0 - lm.loss_in_bad]))
    return trans, pi, 1.0 - loss_ok


def block_loss_pmfs(links: Sequence[LinkModel], n_max: int) -> np.ndarray:
    """Row n: P(K = j), j = 0..n_max, losses among n consecutive packets (n = 0..n_max).

    One pass of the forward recursion gives every block size up to ``n_max``.
    """
    if not 1 <= n_max <= MAX_BLOCK:
        raise LossParameterError(f"block_loss_pmf: block size n = {n_max} outside 1..{MAX_BLOCK}")
    if len(links) > 6:
        raise LossParameterError(f"block_loss_pmf: {len(links)} lossy links on one path; "
                                 "at most 6 (merge loss-free links out first)")
    out = np.zeros((n_max + 1, n_max + 1))
    out[:, 0] = 1.0
    if not links:
        return out
    trans, pi, q = _path_chain(links)
    # f[s, j]: P(state s at the next packet, j losses so far); emit then move
    f = np.zeros((pi.size, n_max + 1))
    f[:, 0] = pi
    out[0] = f.sum(axis=0)
    for n in range(1, n_max + 1):
        emitted = f * (1 - q)[:, None]
        emitted[:, 1:] += f[:, :-1] * q[:, None]
        f = trans.T @ emitted
        out[n] = f.sum(axis=0)
    return out


def block_loss_pmf(links: Sequence[LinkModel], n: int) -> np.ndarray:
    """P(K = j), j = 0..n, losses among n consecutive packets on a path of ``links``."""
    return block_loss_pmfs(links, n)[n]


def residual_loss(pmf: np.ndarray, m: int) -> float:
    """Expected fraction of packets lost after decoding with m repair packets."""
    n = pmf.size - 1
    j = np.arange(n + 1)
    return float((pmf[m + 1:] * j[m + 1:]).sum() / n)


@dataclass(frozen=True, slots=True, kw_only=True)
class FecPolicy:
    """Decision for one path: k = 0 means no FEC."""

    k: int
    m: int
    residual_loss: float
    raw_loss: float
    overhead: float
    retransmit: bool


def choose_fec(links: Sequence[LinkModel], *, target_residual: float,
               k_choices: Sequence[int] = (4, 8, 16, 32, 64), m_max: int = 16,
               max_overhead: float | None = None) -> FecPolicy:
    """Cheapest (k, m) meeting ``target_residual`` on a path of ``links``.

    ``max_overhead`` caps m / k: when bursts make the target too expensive, the
    strongest code within the cap is chosen and retransmission is flagged to
    repair the rest.
    """
    if max_overhead is not None and not max_overhead > 0:
        raise LossParameterError(f"choose_fec: max_overhead = {max_overhead} must be positive")
    if not 0 < target_residual < 1:
        raise LossParameterError(f"choose_fec: target_residual = {target_residual} not in (0,1)")
    if not k_choices or min(k_choices) < 1:
        raise LossParameterError(f"choose_fec: k_choices {tuple(k_choices)} need values >= 1")
    if m_max < 0:
        raise LossParameterError(f"choose_fec: m_max = {m_max} is negative")
    raw = 1.0 - float(np.prod([1.0 - lm.loss_rate for lm in links])) if links else 0.0
    if raw <= target_residual:
        return FecPolicy(k=0, m=0, residual_loss=raw, raw_loss=raw, overhead=0.0,
                         retransmit=False)
    best: FecPolicy | None = None
    strongest: FecPolicy | None = None
    ks = sorted({int(x) for x in k_choices})
    pmfs = block_loss_pmfs(links, max(ks) + m_max)
    for k in ks:
        for m in range(1, m_max + 1):
            if max_overhead is not None and m / k > max_overhead + 1e-12:
                break
            n = k + m
            res = residual_loss(pmfs[n, : n + 1], m)
            cand = FecPolicy(k=k, m=m, residual_loss=res, raw_loss=raw, overhead=m / k,
                             retransmit=False)
            if strongest is None or res < strongest.residual_loss:
                strongest = cand
            if res <= target_residual:
                if best is None or (cand.overhead, k) < (best.overhead, best.k):
                    best = cand
                break
    if best is not None:
        return best
    if strongest is None:  # the cap allows no repair packet for any k
        return FecPolicy(k=0, m=0, residual_loss=raw, raw_loss=raw, overhead=0.0,
                         retransmit=True)
    return FecPolicy(k=strongest.k, m=strongest.m, residual_loss=strongest.residual_loss,
                     raw_loss=raw, overhead=strongest.overhead, retransmit=True)


def simulate_block_residual(lost: np.ndarray, k: int, m: int) -> float:
    """Residual loss of a recorded loss sequence cut into blocks of k + m (for checks)."""
    n = k + m
    blocks = lost[: lost.size // n * n].reshape(-1, n)
    j = blocks.sum(axis=1)
    return float(np.where(j > m, j, 0).sum() / blocks.size)


__all__ = ["FecPolicy", "LinkModel", "block_loss_pmf", "block_loss_pmfs", "choose_fec",
           "residual_loss", "simulate_block_residual"]
