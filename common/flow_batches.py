"""Per-flow batch utilities of the vectorised congestion-control engines (HPCC in
``controller.cc``, DCQCN in ``traffic.cc.dcqcn_engine``): apply a batch of per-flow events in
rounds so each round is one numpy operation and each flow keeps its order."""
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
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_idx)) + 1))
    group_start = np.repeat(starts, np.diff(np.append(starts, sorted_idx.size)))
    rank = np.empty_like(order)
    rank[order] = np.arange(sorted_idx.size) - group_start
    top = int(rank.max())
    if top == 0:
        return [np.arange(idx.size)]
    return [np.flatnonzero(rank == k) for k in range(top + 1)]


def thin_per_key(idx: np.ndarray, max_per_key: int) -> np.ndarray:
    """Positions of ``idx`` to keep so that each value keeps at most ``max_per_key``
    occurrences, spread evenly over its occurrences and always including its last one
    (batch order is kept).

    Why: a batch from a busy agent holds hundreds of samples of one flow, and the
    engines apply a flow's samples one round each; samples closer together than the
    EWMA horizon add little that the next one does not carry (rates come from counter
    deltas, the EWMA weighs each sample by the time it spans).
    """
    idx = np.asarray(idx)
    if max_per_key < 1:
        raise ValueError(f"thin_per_key: max_per_key = {max_per_key} must be >= 1")
    if idx.size <= max_per_key:
        return np.arange(idx.size)
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(sorted_idx)) + 1))
    counts = np.diff(np.append(starts, sorted_idx.size))
    if counts.max() <= max_per_key:
        return np.arange(idx.size)
    group_start = np.repeat(starts, counts)
    n = np.repeat(counts, counts)
    rank = np.arange(sorted_idx.size) - group_start
    k = np.minimum(n, max_per_key)
    # keep the last occurrence of each of k equal buckets
    keep_sorted = (rank * k) // n != ((rank + 1) * k) // n
    keep = np.zeros(idx.size, dtype=bool)
    keep[order[keep_sorted]] = True
    return np.flatnonzero(keep)
