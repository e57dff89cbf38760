"""Reports produced by p4/int_rocev2.p4 on the softswitch, decoded by the collector.

Uses the P4 tests' harness (tests.helpers.p4int) read-only to build a
three-switch chain h1 - s1 - s2 - s3 - h2 whose last switch is a report-mode sink.
"""
from __future__ import annotations

import pytest

from controller.int import Collector, CollectorConfig
from controller.int.feed import hop_samples
from tests.helpers import p4int as h

UDP_REPORT_OFFSET = 14 + 20 + 8  # Ethernet / IPv4 (no options) / UDP

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness():  # type: ignore[no-untyped-def]
    checked = h.load_checked()
    return h, checked


def test_collector_decodes_program_reports(harness) -> None:  # type: ignore[no-untyped-def]
    h, checked = harness
    chain = h.Chain.build(3, lambda: h.compile_program(checked), sink_mode="report")
    sink = chain.switches[-1]
    sink.report_to(3, payload_bytes=12, hw_id=5)
    reports = []
    delivered = 0
    for psn in range(20):
        for port, data in chain.send(h.roce_frame(psn=psn, sport=0xC001), step_us=50):
            if port == 3:
                reports.append(data[UDP_REPORT_OFFSET:])
            elif port == 2:
                delivered += 1
    assert delivered == 20 and len(reports) == 20
    got = []
    c = Collector(CollectorConfig(report_port=0, agent_port=0),
                  listeners=[lambda b, s: got.append(hop_samples(b, s))])
    batch = c.feed_reports(reports)
    st = c.stats()
    assert st.malformed == {} and st.reports == 20
    assert [(s.node_id, s.hw_id, s.received, s.lost) for s in st.switches] == [(3, 5, 20, 0)]
    assert batch.samples["psn"].tolist() == list(range(20))
    assert set(batch.samples["dest_qp"].tolist()) == {0x11}
    assert set(batch.samples["hop_count"].tolist()) == {3}  # s1, s2 records + s3's metadata
    flows = c.flow_snapshot()
    assert len(flows.slot) == 1 and flows.path_node[0, :3].tolist() == [1, 2, 3]
    hops = c.hop_snapshot()
    assert sorted(hops.node_id.tolist()) == [1, 2, 3]
    line = dict(zip(hops.node_id.tolist(), hops.line_rate_bps.tolist()))
    assert line == {1: 25_000_000_000, 2: 25_001_000_000, 3: 25_002_000_000}
    # every hop's tx bytes grew with each packet, so every hop has a rate
    assert (hops.tx_rate_bps > 0).all()
    assert got and got[0].n_hops.tolist() == [3] * 20


def test_program_reports_drive_hpcc(harness) -> None:  # type: ignore[no-untyped-def]
    """Reports of the P4 program -> collector -> HopSamples -> controller.cc HPCC rates."""
    import numpy as np

    from controller.cc.hpcc import HpccEngine

    h, checked = harness
    chain = h.Chain.build(3, lambda: h.compile_program(checked), sink_mode="report")
    chain.switches[-1].report_to(3)
    cfg = CollectorConfig(report_port=0, agent_port=0, flow_capacity=64)
    engine = HpccEngine(n_flows=cfg.flow_capacity)
    engine.start_flows(np.arange(cfg.flow_capacity), max_rate_bps=25e9)
    decisions = []
    c = Collector(cfg, listeners=[lambda b, s: decisions.append(engine.update(hop_samples(b, s)))])
    for psn in range(30):
        reports = [d[UDP_REPORT_OFFSET:] for port, d in
                   chain.send(h.roce_frame(psn=psn, payload=bytes(1000)), step_us=20) if port == 3]
        c.feed_reports(reports)
    rates = np.concatenate([d.rate_bps for d in decisions])
    assert len(rates) == 30 and np.isfinite(rates).all()
    assert (rates > 0).all() and (rates <= 25e9).all()
    assert np.concatenate([d.updated for d in decisions]).any()
