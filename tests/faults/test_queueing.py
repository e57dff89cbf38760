"""Where a tiny buffer bites: ports whose data arrives faster than they send it (right
after an unshaped host or a WAN delay line, or where two ingresses meet), and not a
port behind another shaped router port of the same rate (two-DC topology, the ring
h1 -> h3 -> h5 -> h7 -> h1 on the paths a warm-up saw)."""
from __future__ import annotations

from controller.topology.routing import paths
from mininet_topos.faults.queueing import queueing_ports
from mininet_topos.topologies import resolve_topology

TOPO = resolve_topology("two-dc")
RING = ("h1", "h3", "h5", "h7")


def _data_ports(choice: int = 0) -> set[tuple[str, int]]:
    """The switch egress ports a ring takes (ECMP path ``choice`` of each pair)."""
    out = set()
    for r, src in enumerate(RING):
        ps = paths(TOPO, src, RING[(r + 1) % len(RING)])
        out |= {(h.src, h.src_port) for h in ps[choice % len(ps)]
                if h.src in TOPO.switch_names}
    return out


def test_first_router_after_a_host_or_the_wan_queues_one_behind_a_shaped_hop_not() -> None:
    data = _data_ports()
    got = set(queueing_ports(TOPO, data, RING))
    assert got and got <= data
    for r, src in enumerate(RING):
        p = next(p for p in paths(TOPO, src, RING[(r + 1) % len(RING)])
                 if all((h.src, h.src_port) in data for h in p if h.src in TOPO.switch_names))
        roles = [next(ln.role for ln in TOPO.links if {str(ln.a), str(ln.b)} == {
            f"{h.src}:{h.src_port}", f"{h.dst}:{h.dst_port}"}) for h in p]
        for i in range(1, len(p)):
            port = (p[i].src, p[i].src_port)
            if port not in data or p[i].src not in TOPO.switch_names:
                continue
            if str(roles[i - 1]) in ("host", "wan"):
                assert port in got, (src, port)
    # h7 -> h1 crosses s8 then s5 before the WAN: s5's port is behind s8's shaped one
    h7_h1 = [p for p in paths(TOPO, "h7", "h1")
             if all((h.src, h.src_port) in data for h in p if h.src in TOPO.switch_names)]
    behind = (h7_h1[0][2].src, h7_h1[0][2].src_port)
    assert behind[0] == "s5" and behind not in got


def test_no_data_no_place() -> None:
    assert queueing_ports(TOPO, set(), RING) == []


def test_no_ring_no_place() -> None:
    assert queueing_ports(TOPO, _data_ports(), ("h1",)) == []
