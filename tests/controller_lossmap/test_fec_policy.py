"""The one FEC policy (controller.runner.fec.FecPolicy), as the controller and the test
bed's kernel-router runs use it: codes per flow path from link counters, only changes
reported, tiny links taken as loss-free."""
from __future__ import annotations

from controller.lossmap import LinkCounters, TimeBins, link_loss_map
from controller.runner.fec import FecPolicy


def _map(lost: list[int], delivered: list[int]):  # one bin, cumulative counters per link
    n = len(lost)
    c = LinkCounters(link_idx=list(range(n)) * 2, ts_ns=[0] * n + [1000] * n,
                     rx_packets=[0] * n + delivered, lost_packets=[0] * n + lost)
    return link_loss_map(bins=TimeBins(start_ns=0, bin_ns=1001, n_bins=1), n_links=n,
                         counters=c)


def test_codes_follow_the_lossy_link_and_only_changes_are_reported() -> None:
    pol = FecPolicy(target_residual=1e-3, k_choices=(8, 16, 32), m_max=8)
    paths = [[0], [1], [0, 1]]
    dec = pol.decide(_map([0, 200], [10_000, 9_800]), paths)
    codes = pol.changes(dec)
    assert [j for j, _, _ in codes] == [0, 1, 2]
    (_, k0, m0), (_, k1, m1), (_, _, m2) = codes
    assert (k0, m0) == (1, 0)              # a clean path: no FEC
    assert m1 > 0 and m2 >= m1 and k1 in (8, 16, 32)
    for j, k, m in codes:
        pol.sent(j, k, m)
    assert pol.changes(pol.decide(_map([0, 200], [10_000, 9_800]), paths)) == []


def test_links_below_min_packets_count_as_loss_free() -> None:
    pol = FecPolicy(target_residual=1e-3, min_packets=500)
    dec = pol.decide(_map([30], [100]), [[0]])
    assert pol.changes(dec) == [(0, 1, 0)]
