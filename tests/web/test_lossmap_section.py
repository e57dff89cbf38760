"""The loss map section of the state file: rates, intervals and the bins up to now."""
from __future__ import annotations

import numpy as np

from controller.lossmap.bins import TimeBins
from controller.lossmap.links import LinkLossMap
from controller.lossmap.report import lossmap_section


def _map(lost: list[list[int]], deliv: list[list[int]]) -> LinkLossMap:
    lo = np.array(lost, float)
    return LinkLossMap(bins=TimeBins(start_ns=0, bin_ns=10**9, n_bins=lo.shape[1]), lost=lo,
                       delivered=np.array(deliv, float), source=np.zeros(lo.shape[0], np.int8),
                       reordered=np.zeros_like(lo))


def test_early_in_a_run_the_window_ends_at_now_not_at_empty_future_bins() -> None:
    m = _map([[0, 5, 10, 0, 0, 0]], [[100, 95, 90, 0, 0, 0]])
    s = lossmap_section(m, ["a->b"], now_ns=2_500_000_000, recent_bins=2)
    assert s["lost"] == [[0, 5, 10]] and s["delivered"] == [[100, 95, 90]]
    assert s["recent_rate"] == [15 / 200]
    assert s["rate"] == [15 / 300]
    lo, hi = s["ci95"][0]
    assert lo < 0.05 < hi


def test_keep_bins_and_links_without_packets() -> None:
    m = _map([[1] * 10, [0] * 10], [[9] * 10, [0] * 10])
    s = lossmap_section(m, ["a->b", "b->a"], now_ns=20 * 10**9, keep_bins=4)
    assert len(s["lost"][0]) == 4 and s["start_unix_s"] == 6.0
    assert s["rate"] == [0.1, None] and s["recent_rate"] == [0.1, None] and s["ci95"][1] is None


def test_recent_rate_is_the_last_bins_that_carried_packets() -> None:
    # counts land in the bin of the sample that brought them: every third bin here
    m = _map([[0, 0, 4, 0, 0, 6, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]],
             [[0, 0, 96, 0, 0, 94, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]])
    s = lossmap_section(m, ["a->b", "b->a"], now_ns=7_500_000_000, recent_bins=2)
    assert s["recent_rate"] == [10 / 200, None]   # not "no data" for the two empty bins
    # a link that carried nothing for the whole recent window has no recent rate
    quiet = lossmap_section(m, ["a->b", "b->a"], now_ns=7_500_000_000, recent_bins=2,
                            recent_window_bins=2)
    assert quiet["recent_rate"] == [None, None]
    one = lossmap_section(m, ["a->b", "b->a"], now_ns=7_500_000_000, recent_bins=1)
    assert one["recent_rate"] == [6 / 100, None]
