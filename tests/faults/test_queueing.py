"""Where the scoring harness may put a fault: only on components the ring's traffic
crosses, and a tiny buffer only where packets arrive faster than the port sends them
(right after an unshaped host, or where two ingresses meet) - not behind a shaped
router port or a WAN link of the same rate, where a one-packet buffer changes nothing.
Two-DC topology, the ring h1 -> h3 -> h5 -> h7 -> h1 on the paths a warm-up saw
(as port rates in the counter samples)."""
from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from controller.diagnose.evidence import PortSample, Telemetry
from controller.topology.model import LinkRole
from controller.topology.routing import paths
from mininet_topos.faults.harness import HarnessConfig, _pick, _places, _where
from mininet_topos.faults.inject import fifo_drops
from mininet_topos.faults.queueing import crossings, queueing_ports, queueing_reasons
from mininet_topos.topologies import resolve_topology

TOPO = resolve_topology("two-dc")
RING = ("h1", "h3", "h5", "h7")


def _ring_paths(choice: int = 0) -> dict[tuple[str, str], tuple]:
    return {(src, RING[(r + 1) % len(RING)]): (ps := paths(
        TOPO, src, RING[(r + 1) % len(RING)]))[choice % len(ps)]
        for r, src in enumerate(RING)}


def _data_ports(choice: int = 0) -> set[tuple[str, int]]:
    """The switch egress ports a ring takes (ECMP path ``choice`` of each pair)."""
    return {(h.src, h.src_port) for p in _ring_paths(choice).values() for h in p
            if h.src in TOPO.switch_names}


def _role(h: object) -> LinkRole:
    return next(ln.role for ln in TOPO.links if {str(ln.a), str(ln.b)} == {
        f"{h.src}:{h.src_port}", f"{h.dst}:{h.dst_port}"})  # type: ignore[attr-defined]


@pytest.mark.parametrize("choice", [0, 1])
def test_tiny_queues_go_right_after_a_host_not_behind_a_shaped_port_or_the_wan(
        choice: int) -> None:
    data = _data_ports(choice)
    got = set(queueing_ports(TOPO, data, RING))
    want = set()
    for p in _ring_paths(choice).values():
        # hop 0 is the host link, hop 1 leaves the first router
        assert _role(p[0]) == LinkRole.HOST
        want.add((p[1].src, p[1].src_port))
        for prev, hop in pairwise(p[1:]):
            if _role(prev) == LinkRole.WAN:   # the port right after the WAN: no queue
                assert (hop.src, hop.src_port) not in got
    # one flow per port in a ring: no fan-in; the four ports after the four hosts
    assert got == want and len(got) == 4
    reasons = queueing_reasons(TOPO, data, RING)
    assert all("after host" in reasons[p] for p in got)


def test_fan_in_queues() -> None:
    """h1 -> h5 (over the WAN) and h7 -> h6 (from s8) meet at s5's port to s7 from two
    ingress ports: it can queue."""
    ring = ("h1", "h5", "h7", "h6")
    data = {(h.src, h.src_port) for r, src in enumerate(ring)
            for h in paths(TOPO, src, ring[(r + 1) % 4])[0] if h.src in TOPO.switch_names}
    assert ("s5", 1) in data
    reasons = queueing_reasons(TOPO, data, ring)
    assert reasons[("s5", 1)] == "fan-in from ingress ports s5:2, s5:3"


def test_no_data_no_place() -> None:
    assert queueing_ports(TOPO, set(), RING) == []
    assert crossings(TOPO, set(), RING) == {}


def test_no_ring_no_place() -> None:
    assert queueing_ports(TOPO, _data_ports(), ("h1",)) == []


def test_crossings_name_the_pairs_on_each_component() -> None:
    c = crossings(TOPO, _data_ports(), RING)
    for (src, dst), p in _ring_paths().items():
        pair = f"{src}->{dst}"
        assert pair in c[dst]            # the receiving host
        for h in p:
            assert pair in c[str(h)]
            if h.src in TOPO.switch_names:
                assert pair in c[f"{h.src}:{h.src_port}"]
    assert "h2" not in c and "h1->h3" not in c.get("h3->h1", [])


def _telemetry(data: set[tuple[str, int]]) -> Telemetry:
    """Warm-up counter samples: data ports send 16 Mbit/s, the others ACKs."""
    tel = Telemetry()
    for sw in TOPO.switches:
        for ln in TOPO.links:
            for end in (ln.a, ln.b):
                if end.node == sw.name:
                    bps = 16e6 if (end.node, end.port) in data else 0.3e6
                    tel.ports[(end.node, end.port)] = [
                        PortSample(t=float(i), qlen_pkts=0, tx_rate_bps=bps,
                                   line_rate_bps=1e8) for i in range(5)]
    return tel


@pytest.mark.parametrize("choice", [0, 1])
def test_every_place_the_harness_draws_is_on_the_rings_paths(choice: int) -> None:
    data = _data_ports(choice)
    tel = _telemetry(data)
    places = _places(TOPO, tel, RING)
    crossed = crossings(TOPO, data, RING)
    for kind in ("gray_loss", "rate_degraded", "link_down", "congestion", "tiny_queue",
                 "slow_receiver"):
        assert places[kind], kind
        assert all(crossed.get(t) for t in places[kind]), (kind, places[kind])
    assert set(places["tiny_queue"]) == {f"{s}:{p}" for s, p in queueing_ports(
        TOPO, data, RING)}
    # only directions carrying data (the ACK directions are not in `crossed`)
    for t in places["congestion"]:
        sw, _, port = t.split("->")[0].partition(":")
        assert (sw, int(port)) in data
    rng = np.random.default_rng(2)
    cfg = HarnessConfig()
    for _ in range(200):
        f = _pick(rng, cfg, places)
        if f is None:
            continue
        where = _where(f, TOPO, tel, RING)
        if f.kind == "straggler":
            assert where == {}
            continue
        assert where["crossed_by"], f
        if f.kind == "tiny_queue":
            assert "after host" in where["queues_because"]


TC_STATS = """\
qdisc htb 1: root refcnt 3 r2q 10 default 0x1 direct_packets_stat 0 direct_qlen 1000
 Sent 9000 bytes 6 pkt (dropped 3, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
qdisc pfifo 10: parent 1:1 limit 1p
 Sent 7500 bytes 5 pkt (dropped 41, overlimits 0 requeues 0)
 backlog 0b 0p requeues 0
"""


def test_fifo_drops_reads_the_ports_fifo_not_the_shaper() -> None:
    assert fifo_drops(TC_STATS) == 41
    assert fifo_drops(TC_STATS.split("qdisc pfifo")[0]) is None
