"""Batch utilities shared by the engines."""
from __future__ import annotations

import numpy as np


def occurrence_rounds(idx: np.ndarray) -> list[np.ndarray]:
    """Split positions of ``idx`` into rounds in which every value appears at most once.

    Round k holds the k-th occurrence of each value, so applying the rounds in
    order keeps batch order per flow while each round stays fully vectorised.
    """
    idx = np.asarray(idx)
    if idx.size == 0:
        return []
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_idx)) + 1]
    group_start = np.repeat(starts, np.diff(np.r_[starts, sorted_idx.size]))
    rank = np.empty_like(order)
    rank[order] = np.arange(sorted_idx.size) - group_start
    top = int(rank.max())
    if top == 0:
        return [np.arange(idx.size)]
    return [np.flatnonzero(rank == k) for k in range(top + 1)]
