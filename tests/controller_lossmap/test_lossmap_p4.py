"""Loss maps from the real data plane: p4/int_rocev2.p4 on the softswitch.

Three switches in a line (h1 - s1 - s2 - s3 - h2, the P4 tests' harness, used
read-only). Packets of two RoCEv2 flows are dropped on the fabric links s1->s2
and s2->s3 by Gilbert-Elliott processes between the switches; the switches count
them with link sequence numbers (digests, registers, port counters) and the host
sees PSN gaps. The maps built from what the switches and host report must equal
the injected drops.
"""
from __future__ import annotations

import numpy as np
import pytest

from controller.lossmap import (
    LinkCounters,
    LinkIndex,
    LossEvents,
    Source,
    TimeBins,
    cycles_from_events,
    fit_gilbert_elliott,
    flow_loss_map,
    link_loss_map,
    localize,
    simulate_gilbert_elliott,
)
from tests.helpers import p4int as h

pytestmark = pytest.mark.slow

LOST = "SwitchIngress.link_lost_packets"
RX = "SwitchIngress.ingress_port_counter"
N = 6000
BIN_NS = 2_000_000
GE = {0: (0.01, 0.3, 0.9), 1: (0.5, 0.5, 0.006)}  # s1->s2 bursty, s2->s3 independent


@pytest.fixture(scope="module")
def run():  # type: ignore[no-untyped-def]
    checked = h.load_checked()
    chain = h.Chain.build(3, lambda: h.compile_program(checked), sink_mode="host")
    s1, s2, s3 = chain.switches
    for s in chain.switches:  # one time base for all switches and the host
        s.clock[0] = 0
    drops = {l: simulate_gilbert_elliott(n=N, p=p, r=r, loss_in_bad=d, seed=20 + l)
             for l, (p, r, d) in GE.items()}
    receivers = {0: s2, 1: s3}
    index = LinkIndex(np.array([2, 3]), np.array([1, 1]), ("s1-s2", "s2-s3"))
    ev: list[tuple[int, int, int, int]] = []         # (link, ts, expected, received)
    cn: list[tuple[int, int, int, int]] = []         # (link, ts, rx, lost)
    truth: dict[int, list[int]] = {0: [], 1: []}      # reveal time of each drop
    injected_by_flow = np.zeros(2, dtype=int)
    host: list[tuple[int, int, int]] = []             # (flow, ts, psn)
    pending = {0: [], 1: []}                          # flows of drops not yet revealed
    seen = {0: 0, 1: 0}
    psn = [0, 0]

    def now_ns(s) -> int:  # type: ignore[no-untyped-def]
        return s.clock[0] * 1000

    def poll(t_ns: int) -> None:
        for l, s in receivers.items():
            cn.append((l, t_ns, s.runtime.counter_read(RX, 1)[0], s.reg(LOST, 1)))

    poll(-1)
    for k in range(N):
        flow = k % 2
        frame = h.roce_frame(psn=psn[flow], sport=0xC001 + flow, payload=bytes(64))
        psn[flow] += 1
        for s in chain.switches:
            s.clock[0] += 5
        frames = [d for p, d in s1.process(1, frame) if p == 2]
        for l, s in receivers.items():
            assert len(frames) == 1
            i = seen[l]
            seen[l] += 1
            if drops[l][i] and i < N - 200:  # the last packets arrive: every gap is seen
                pending[l].append(flow)
                frames = []
                break
            frames = [d for p, d in s.process(1, frames[0]) if p == 2]
            for f in pending[l]:
                truth[l].append(now_ns(s))
                injected_by_flow[f] += 1
            pending[l] = []
            for port, exp, rcv in (tuple(d) for d in s.digests()):
                ev.append((int(index.lookup([s.node_id], [port])[0]), now_ns(s), exp, rcv))
        if frames:
            after = h.split_int(frames[0])["after"]
            host.append((flow, now_ns(s3), int.from_bytes(after[9:12], "big")))
        if now_ns(s3) // BIN_NS != (now_ns(s3) + 5000) // BIN_NS:
            poll(now_ns(s3))  # last sample of every bin
    poll(now_ns(s3))
    e, c, hh = np.array(ev), np.array(cn), np.array(host)
    return {
        "events": LossEvents(link_idx=e[:, 0], ts_ns=e[:, 1], expected=e[:, 2], received=e[:, 3]),
        "counters": LinkCounters(link_idx=c[:, 0], ts_ns=c[:, 1], rx_packets=c[:, 2],
                                 lost_packets=c[:, 3]),
        "truth": truth, "by_flow": injected_by_flow, "host": hh,
        "bins": TimeBins(start_ns=0, bin_ns=BIN_NS, n_bins=int(hh[:, 1].max() // BIN_NS) + 1),
    }


def binned(times: list[int], bins: TimeBins) -> np.ndarray:
    return np.bincount(bins.index(times), minlength=bins.n_bins).astype(float)


def test_digest_map_equals_injected_drops_per_link_and_bin(run):  # type: ignore[no-untyped-def]
    m = link_loss_map(bins=run["bins"], n_links=2, events=run["events"])
    for link in (0, 1):
        assert len(run["truth"][link]) > 10
        np.testing.assert_array_equal(m.lost[link], binned(run["truth"][link], run["bins"]))


def test_register_and_counter_map_equals_injected_drops(run):  # type: ignore[no-untyped-def]
    m = link_loss_map(bins=run["bins"], n_links=2, counters=run["counters"])
    assert list(m.source) == [Source.COUNTER, Source.COUNTER]
    for link in (0, 1):
        np.testing.assert_array_equal(m.lost[link], binned(run["truth"][link], run["bins"]))
    # s2 received N minus the drops on s1->s2; s3 that minus the drops on s2->s3
    assert m.delivered[0].sum() == N - len(run["truth"][0])
    assert m.delivered[1].sum() == N - len(run["truth"][0]) - len(run["truth"][1])


def test_host_psn_gaps_equal_drops_per_flow(run):  # type: ignore[no-untyped-def]
    hh = run["host"]
    fm = flow_loss_map(bins=run["bins"], n_flows=2, flow_idx=hh[:, 0], ts_ns=hh[:, 1],
                       psn=hh[:, 2])
    np.testing.assert_array_equal(fm.lost.sum(axis=1), run["by_flow"])


def test_unmonitored_link_found_by_explaining_away(run):  # type: ignore[no-untyped-def]
    ev = run["events"]
    keep = ev.link_idx == 0  # s2-s3 has no link sequence numbers in this variant
    only0 = LossEvents(link_idx=ev.link_idx[keep], ts_ns=ev.ts_ns[keep],
                       expected=ev.expected[keep], received=ev.received[keep])
    links = link_loss_map(bins=run["bins"], n_links=2, events=only0, event_links=[0])
    hh = run["host"]
    fm = flow_loss_map(bins=run["bins"], n_flows=2, flow_idx=hh[:, 0], ts_ns=hh[:, 1],
                       psn=hh[:, 2])
    loc = localize(flows=fm, paths=[[0, 1], [0, 1]], links=links)
    assert loc.link_map.source[1] == Source.VOTE
    assert loc.link_map.lost[1].sum() == pytest.approx(len(run["truth"][1]), abs=2)
    assert loc.link_map.lost[0].sum() == len(run["truth"][0])


def test_burst_fit_of_the_bursty_link(run):  # type: ignore[no-untyped-def]
    fit = fit_gilbert_elliott(cycles_from_events(run["events"], 0), confidence=0.99)
    p, r, d = GE[0]
    assert fit.r.contains(r) and fit.p.contains(p), (fit.p, fit.r)
    assert fit.loss_rate.contains(p / (p + r) * d)
