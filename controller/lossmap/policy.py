"""From a loss map to per-flow FEC settings that ride along with the rate feedback.

Each link gets a loss model: a Gilbert-Elliott fit when its loss events hold
enough bursts, otherwise independent losses at its measured rate. A flow's
path combines the models of its lossy links; paths sharing the same lossy
links share one decision.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.lossmap.burst import cycles_from_events, fit_gilbert_elliott
from controller.lossmap.errors import LossInputError, LossParameterError
from controller.lossmap.fec import FecPolicy, LinkModel, choose_fec
from controller.lossmap.links import LinkLossMap, LossEvents
from controller.lossmap.localize import incidence

MAX_MODEL_LINKS = 4
"""Lossy links modelled as separate chains per path; further ones fold into one Bernoulli."""


def fit_link_models(link_map: LinkLossMap, *, events: LossEvents | None = None,
                    min_bursts: int = 20, seed: int = 0) -> list[LinkModel]:
    """One ``LinkModel`` per link of ``link_map`` (whole time span)."""
    if min_bursts < 2:
        raise LossParameterError(f"fit_link_models: min_bursts = {min_bursts} < 2")
    lost = link_map.lost.sum(axis=1)
    tot = lost + link_map.delivered.sum(axis=1)
    rate = np.divide(lost, tot, out=np.zeros_like(lost, dtype=float), where=tot > 0)
    models: list[LinkModel] = []
    for link in range(link_map.n_links):
        model = LinkModel.bernoulli(float(min(rate[link], 1.0)))
        if events is not None and lost[link] > 0:
            cy = cycles_from_events(events, link)
            if cy.loss_len.size >= min_bursts:
                fit = fit_gilbert_elliott(cy, resamples=50, seed=seed)
                if 0 < fit.p.value <= 1 and 0 < fit.r.value <= 1:
                    model = LinkModel(p=fit.p.value, r=fit.r.value,
                                      loss_in_bad=fit.loss_in_bad.value)
        models.append(model)
    return models


@dataclass(slots=True, kw_only=True)
class PathFec:
    """Per-flow FEC decision arrays, ready for ``controller.cc.encode_feedback``."""

    fec_k: np.ndarray
    fec_m: np.ndarray
    retransmit: np.ndarray
    residual_loss: np.ndarray
    raw_loss: np.ndarray


def path_fec(*, paths: npt.ArrayLike | list[list[int]], models: list[LinkModel],
             target_residual: float, k_choices: tuple[int, ...] = (4, 8, 16, 32, 64),
             m_max: int = 16, max_overhead: float | None = None) -> PathFec:
    """Choose (k, m) for every flow's path from the link models."""
    inc = incidence(paths, len(models))
    if not models:
        raise LossInputError("path_fec: no link models")
    n = inc.shape[0]
    out = PathFec(fec_k=np.zeros(n, np.int64), fec_m=np.zeros(n, np.int64),
                  retransmit=np.zeros(n, bool), residual_loss=np.zeros(n),
                  raw_loss=np.zeros(n))
    lossy = np.array([m.loss_rate > 0 for m in models])
    keys = inc & lossy[None, :]
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).ravel()
    for u, key in enumerate(uniq):
        chain = sorted((models[i] for i in np.flatnonzero(key)),
                       key=lambda m: m.loss_rate, reverse=True)
        if len(chain) > MAX_MODEL_LINKS:
            rest = 1.0 - float(np.prod([1 - m.loss_rate for m in chain[MAX_MODEL_LINKS:]]))
            chain = chain[:MAX_MODEL_LINKS] + [LinkModel.bernoulli(rest)]
        pol: FecPolicy = choose_fec(chain, target_residual=target_residual,
                                    k_choices=k_choices, m_max=m_max,
                                    max_overhead=max_overhead)
        rows = inverse == u
        out.fec_k[rows] = pol.k
        out.fec_m[rows] = pol.m
        out.retransmit[rows] = pol.retransmit
        out.residual_loss[rows] = pol.residual_loss
        out.raw_loss[rows] = pol.raw_loss
    return out
