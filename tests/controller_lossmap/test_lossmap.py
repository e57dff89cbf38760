"""Loss maps against synthetic traces with known per-link losses."""
from __future__ import annotations

import numpy as np
import pytest

from controller.lossmap import (
    LinkCounters,
    LinkIndex,
    LinkKeyError,
    LossEvents,
    LossInputError,
    LossParameterError,
    Source,
    TimeBins,
    cycles_from_events,
    cycles_from_sequence,
    fit_gilbert_elliott,
    flow_loss_map,
    link_loss_map,
    localize,
    psn_gaps,
    run_histogram,
)
from controller.lossmap.synth import binned, make_trace

PATHS = [[0, 2, 4], [1, 2, 4], [0, 3, 5], [1, 3, 5], [0, 2, 6], [1, 3, 6]]
N_LINKS = 7
GE = {2: (0.002, 0.3, 0.8), 5: (0.5, 0.5, 0.01)}   # link 5: independent 0.5 % loss
BIN_NS = 10**6


@pytest.fixture(scope="module")
def trace():
    return make_trace(paths=PATHS, n_links=N_LINKS, link_ge=GE, packets_per_flow=20_000,
                      interval_ns=1000, sample_ns=BIN_NS, seed=5)


@pytest.fixture(scope="module")
def bins(trace):
    return TimeBins(start_ns=0, bin_ns=BIN_NS, n_bins=int(trace.host_ts.max() // BIN_NS) + 1)


def test_event_map_equals_injected_losses(trace, bins):
    m = link_loss_map(bins=bins, n_links=N_LINKS, events=trace.events,
                      event_links=np.arange(N_LINKS))
    truth = binned(trace.link_lost_ts, bins)
    assert truth[2].sum() > 100 and truth[5].sum() > 50
    np.testing.assert_array_equal(m.lost, truth)
    assert np.all(m.source == Source.EVENT)


def test_counter_map_equals_injected_losses_across_wrap(trace, bins):
    m = link_loss_map(bins=bins, n_links=N_LINKS, counters=trace.counters)
    np.testing.assert_array_equal(m.lost, binned(trace.link_lost_ts, bins))
    delivered = [np.sum(~lost) for lost in trace.link_seq_lost]
    np.testing.assert_array_equal(m.delivered.sum(axis=1), delivered)
    rate = m.loss_rate()
    assert np.nanmean(rate[5]) == pytest.approx(0.005, rel=0.3)


def test_events_alone_give_delivered_between_gaps(trace, bins):
    m = link_loss_map(bins=bins, n_links=N_LINKS, events=trace.events)
    lost = trace.link_seq_lost[2]
    first, last = np.flatnonzero(lost)[[0, -1]]
    # from the end of the first gap to the start of the last gap
    seg = lost[first:last + 1]
    starts = np.flatnonzero(seg & ~np.r_[False, seg[:-1]])
    first_end = np.flatnonzero(~seg)[0]
    assert m.delivered[2].sum() == np.sum(~seg[first_end:starts[-1]])


def test_reordering_is_not_loss():
    ev = LossEvents(link_idx=[0, 0], ts_ns=[1, 2], expected=[10, 5], received=[13, 3])
    m = link_loss_map(bins=TimeBins(start_ns=0, bin_ns=10, n_bins=1), n_links=1, events=ev)
    assert m.lost[0, 0] == 3 and m.reordered[0, 0] == 1


def test_psn_map_equals_injected_flow_losses(trace, bins):
    fm = flow_loss_map(bins=bins, n_flows=len(PATHS), flow_idx=trace.host_flow,
                       ts_ns=trace.host_ts, psn=trace.host_psn)
    np.testing.assert_array_equal(fm.lost, binned(trace.flow_lost_ts, bins))
    assert fm.lost[3].sum() > 0                             # flows through link 5 lose
    assert fm.lost[5].sum() == 0                            # clean path


def test_psn_gaps_ignore_retransmissions_and_wrap():
    top = (1 << 24) - 1
    g = psn_gaps(flow_idx=[0] * 9, ts_ns=range(9),
                 psn=[top - 2, top - 1, 1, 2, 0, top, 3, 6, 4])
    # lost: top, 0 (revealed by 1); 4, 5 (revealed by 6); 0/top/4 later are resends
    assert g.lost.tolist() == [2, 2]
    assert g.first_lost_psn.tolist() == [top, 4]


def test_localisation_recovers_unmonitored_lossy_link(trace, bins):
    unmonitored = [2, 3, 5]
    keep = ~np.isin(trace.events.link_idx, unmonitored)
    ev = LossEvents(link_idx=trace.events.link_idx[keep], ts_ns=trace.events.ts_ns[keep],
                    expected=trace.events.expected[keep], received=trace.events.received[keep])
    monitored = np.setdiff1d(np.arange(N_LINKS), unmonitored)
    links = link_loss_map(bins=bins, n_links=N_LINKS, events=ev, event_links=monitored)
    fm = flow_loss_map(bins=bins, n_flows=len(PATHS), flow_idx=trace.host_flow,
                       ts_ns=trace.host_ts, psn=trace.host_psn)
    loc = localize(flows=fm, paths=PATHS, links=links)
    truth = binned(trace.link_lost_ts, bins)
    est = loc.link_map.lost
    assert list(loc.link_map.source[unmonitored]) == [Source.VOTE] * 3
    for link in (2, 5):
        assert est[link].sum() == pytest.approx(truth[link].sum(), rel=0.02, abs=2)
        assert np.abs(est[link] - truth[link]).sum() <= 0.05 * truth[link].sum() + 4
    assert est[3].sum() <= 0.05 * truth[5].sum()   # loss-free link stays (nearly) clean
    np.testing.assert_array_equal(est[monitored], truth[monitored])
    assert loc.unexplained.sum() == 0


def test_localisation_points_at_shared_link():
    # two lossy flows share link 0; each also crosses a private unmonitored link
    bins = TimeBins(start_ns=0, bin_ns=10, n_bins=1)
    from controller.lossmap import FlowLossMap, PsnGaps
    z = np.zeros(0, dtype=np.int64)
    fm = FlowLossMap(bins=bins, lost=np.array([[10.0], [12.0], [0.0]]),
                     delivered=np.array([[100.0], [100.0], [100.0]]),
                     gaps=PsnGaps(flow_idx=z, ts_ns=z, first_lost_psn=z, lost=z))
    links = link_loss_map(bins=bins, n_links=4)
    loc = localize(flows=fm, paths=[[1, 0], [2, 0], [3]], links=links, min_clean_packets=50)
    assert np.argmax(loc.link_map.lost[:, 0]) == 0
    assert loc.link_map.lost[0, 0] > 0.7 * 22
    assert loc.exonerated[3, 0] and loc.link_map.lost[3, 0] == 0


def test_burst_stats_and_ge_fit_from_events(trace):
    cy = cycles_from_events(trace.events, 2)
    lost = trace.link_seq_lost[2]
    ref = cycles_from_sequence(lost)
    np.testing.assert_array_equal(cy.loss_len, ref.loss_len)
    np.testing.assert_array_equal(cy.gap_len[:-1], ref.gap_len[:-1])
    h = run_histogram(cy.loss_len, 16)
    assert h.sum() == cy.loss_len.size and h[0] == 0


@pytest.mark.parametrize("p,r,d", [(0.01, 0.3, 1.0), (0.005, 0.2, 0.6), (0.02, 0.5, 0.8)])
def test_ge_fit_recovers_parameters_within_ci(p, r, d):
    from controller.lossmap import simulate_gilbert_elliott
    x = simulate_gilbert_elliott(n=400_000, p=p, r=r, loss_in_bad=d, seed=11)
    fit = fit_gilbert_elliott(cycles_from_sequence(x), confidence=0.99)
    assert fit.p.contains(p), fit.p
    assert fit.r.contains(r), fit.r
    assert fit.loss_in_bad.contains(d) or (d == 1.0 and fit.loss_in_bad.high >= 0.99)
    assert fit.loss_rate.contains(p / (p + r) * d), fit.loss_rate
    assert fit.loss_rate.high - fit.loss_rate.low < 0.3 * fit.loss_rate.value


def test_link_index_and_errors():
    idx = LinkIndex(np.array([1, 1, 2]), np.array([1, 2, 1]), ("s1:1", "s1:2", "s2:1"))
    assert idx.lookup([2, 1], [1, 2]).tolist() == [2, 1]
    with pytest.raises(LinkKeyError, match="switch 3 port 1"):
        idx.lookup([3], [1])
    with pytest.raises(LossParameterError, match="bin_ns = 0"):
        TimeBins(start_ns=0, bin_ns=0, n_bins=1)
    with pytest.raises(LossInputError, match="link 9"):
        link_loss_map(bins=TimeBins(start_ns=0, bin_ns=1, n_bins=1), n_links=2,
                      counters=LinkCounters(link_idx=[9], ts_ns=[0], rx_packets=[0],
                                            lost_packets=[0]))
    with pytest.raises(LossInputError, match="PSN 16777216"):
        psn_gaps(flow_idx=[0, 0], ts_ns=[0, 1], psn=[0, 1 << 24])
    with pytest.raises(LossInputError, match="need at least 2"):
        fit_gilbert_elliott(cycles_from_sequence([False, True, False]))


def test_net_counters_take_back_late_packets_and_survive_restart():
    bins = TimeBins(start_ns=0, bin_ns=100, n_bins=4)
    big = (1 << 64) - 3  # 64-bit counters about to wrap
    c = LinkCounters(link_idx=[0] * 5, ts_ns=[0, 99, 199, 299, 399],
                     rx_packets=[big, 2, 10, 7, 20],
                     lost_packets=[5, 9, 8, 1, 4])
    m = link_loss_map(bins=bins, n_links=1, counters=c)
    # bin0: +4 lost; bin1: a late packet takes one back; bin2: restart (rx 10 -> 7):
    # counts since restart (7 rx, 1 lost); bin3: +13 rx, +3 lost
    assert m.lost[0].tolist() == [4, -1, 1, 3]
    assert m.delivered[0].tolist() == [5, 8, 7, 13]


def test_prefer_and_resync():
    bins = TimeBins(start_ns=0, bin_ns=100, n_bins=1)
    ev = LossEvents(link_idx=[0, 0], ts_ns=[1, 2], expected=[10, 100],
                    received=[12, 100 + 0x100000])
    c = LinkCounters(link_idx=[0, 0], ts_ns=[-1, 50], rx_packets=[0, 50],
                     lost_packets=[0, 1])
    assert link_loss_map(bins=bins, n_links=1, events=ev).lost[0, 0] == 2  # resync ignored
    assert link_loss_map(bins=bins, n_links=1, events=ev, counters=c).lost[0, 0] == 1
    m = link_loss_map(bins=bins, n_links=1, events=ev, counters=c, prefer="events")
    assert m.lost[0, 0] == 2 and m.source[0] == Source.EVENT
    with pytest.raises(LossInputError, match="prefer = 'x'"):
        link_loss_map(bins=bins, n_links=1, prefer="x")


def _split(n: int, parts: int, seed: int) -> list[np.ndarray]:
    cuts = np.sort(np.random.default_rng(seed).choice(np.arange(1, n), parts - 1, replace=False))
    return np.split(np.arange(n), cuts)


def test_streams_equal_batch_maps(trace, bins):
    from controller.lossmap.stream import FlowLossStream, LinkLossStream
    ls = LinkLossStream(n_links=N_LINKS, bin_ns=BIN_NS, n_bins=bins.n_bins, counter_bits=32)
    lse = LinkLossStream(n_links=N_LINKS, bin_ns=BIN_NS, n_bins=bins.n_bins)
    fs = FlowLossStream(n_flows=len(PATHS), bin_ns=BIN_NS, n_bins=bins.n_bins)
    c, ev = trace.counters, trace.events
    # deliver counters poll by poll (time order), events and records in uneven chunks
    for t in np.unique(c.ts_ns):
        m = c.ts_ns == t
        ls.add_counters(LinkCounters(link_idx=c.link_idx[m], ts_ns=c.ts_ns[m],
                                     rx_packets=c.rx_packets[m], lost_packets=c.lost_packets[m],
                                     counter_bits=32))
    order = np.argsort(ev.ts_ns, kind="stable")
    for part in _split(order.size, 9, 1):
        i = order[part]
        lse.add_events(LossEvents(link_idx=ev.link_idx[i], ts_ns=ev.ts_ns[i],
                                  expected=ev.expected[i], received=ev.received[i]))
    order = np.argsort(trace.host_ts, kind="stable")
    for part in _split(order.size, 13, 2):
        i = order[part]
        fs.add(flow_idx=trace.host_flow[i], ts_ns=trace.host_ts[i], psn=trace.host_psn[i])
    truth = binned(trace.link_lost_ts, bins)
    m = ls.snapshot()
    assert m.bins == bins
    np.testing.assert_array_equal(m.lost, truth)
    batch = link_loss_map(bins=bins, n_links=N_LINKS, counters=trace.counters)
    np.testing.assert_array_equal(m.delivered, batch.delivered)
    me = lse.snapshot()
    np.testing.assert_array_equal(me.lost, truth)
    batch_e = link_loss_map(bins=bins, n_links=N_LINKS, events=trace.events)
    np.testing.assert_array_equal(me.delivered, batch_e.delivered)
    np.testing.assert_array_equal(ls.lost_total, truth.sum(axis=1))
    fm = fs.snapshot()
    np.testing.assert_array_equal(fm.lost, binned(trace.flow_lost_ts, bins))
    np.testing.assert_array_equal(fm.delivered.sum(axis=1),
                                  np.bincount(trace.host_flow, minlength=len(PATHS)))


def test_stream_window_slides():
    from controller.lossmap.stream import LinkLossStream
    s = LinkLossStream(n_links=1, bin_ns=10, n_bins=3)
    for k in range(6):
        s.add_events(LossEvents(link_idx=[0], ts_ns=[10 * k + 1], expected=[100 * k],
                                received=[100 * k + k + 1]))
    m = s.snapshot()
    assert m.bins.start_ns == 30 and m.lost[0].tolist() == [4, 5, 6]
    assert s.lost_total[0] == 21
    s.add_events(LossEvents(link_idx=[0], ts_ns=[5], expected=[0], received=[9]))
    assert s.ring.late_values == 2  # the gap and its reordering flag, both too old


def test_bin_starts():
    b = TimeBins(start_ns=1000, bin_ns=10, n_bins=3)
    assert b.starts_ns().tolist() == [1000, 1010, 1020]
    assert b.index([999, 1000, 1019, 5000]).tolist() == [0, 0, 1, 2]
    assert b.inside([999, 1029, 1030]).tolist() == [False, True, False]
    assert TimeBins.covering([25, 3], 10) == TimeBins(start_ns=0, bin_ns=10, n_bins=3)


def test_path_bursts_from_psn_gaps_match_the_injected_sequence():
    from controller.lossmap import cycles_from_psn_gaps, simulate_gilbert_elliott
    x = simulate_gilbert_elliott(n=50_000, p=0.01, r=0.3, loss_in_bad=0.8, seed=4)
    x[0] = x[-1] = False
    psn = ((1 << 24) - 1000 + np.arange(x.size)) % (1 << 24)
    g = psn_gaps(flow_idx=np.zeros((~x).sum(), int), ts_ns=np.flatnonzero(~x), psn=psn[~x])
    cy = cycles_from_psn_gaps(g, 0)
    ref = cycles_from_sequence(x)
    np.testing.assert_array_equal(cy.loss_len, ref.loss_len)
    np.testing.assert_array_equal(cy.gap_len[:-1], ref.gap_len[:-1])
    fit = fit_gilbert_elliott(cy, confidence=0.99)
    assert fit.r.contains(0.3) and fit.loss_in_bad.contains(0.8)


def test_wilson_interval_covers_the_rate():
    from controller.lossmap.links import wilson_interval
    lo, hi = wilson_interval([0, 5, 50, 0], [100, 100, 100, 0])
    assert lo[0] == 0 and 0.03 < hi[0] < 0.045  # "rule of three"-like upper bound
    assert lo[1] < 0.05 < hi[1] and lo[2] < 0.5 < hi[2]
    assert np.isnan(lo[3]) and np.isnan(hi[3])
    m = link_loss_map(bins=TimeBins(start_ns=0, bin_ns=10, n_bins=1), n_links=1,
                      events=LossEvents(link_idx=[0, 0], ts_ns=[1, 2], expected=[10, 100],
                                        received=[12, 101]))
    lo, hi = m.loss_rate_ci()
    assert lo[0, 0] < 3 / 91 < hi[0, 0]


def test_stream_errors_name_the_value():
    from controller.lossmap.stream import BinRing, FlowLossStream, LinkLossStream
    with pytest.raises(LossParameterError, match="must all be positive"):
        BinRing(n_rows=1, bin_ns=0, n_bins=1, names=("a",))
    with pytest.raises(LossParameterError, match="prefer = 'x'"):
        LinkLossStream(n_links=1, bin_ns=1, n_bins=1, prefer="x")
    s = LinkLossStream(n_links=2, bin_ns=1, n_bins=1)
    with pytest.raises(LossInputError, match="link 5 outside 0..1"):
        s.add_events(LossEvents(link_idx=[5], ts_ns=[0], expected=[0], received=[1]))
    with pytest.raises(LossInputError, match="counter_bits 32 != stream's 64"):
        s.add_counters(LinkCounters(link_idx=[0], ts_ns=[0], rx_packets=[0], lost_packets=[0],
                                    counter_bits=32))
    with pytest.raises(LossInputError, match="flow index outside 0..0"):
        FlowLossStream(n_flows=1, bin_ns=1, n_bins=1).add(flow_idx=[3], ts_ns=[0], psn=[0])
