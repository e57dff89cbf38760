"""Base RTT of a flow from the topology: HPCC's ``T``.

Why: HPCC normalises the queue by the bandwidth-delay product ``B * T``
(``u = qlen / (B T) + txRate / B``) and uses ``T`` as the EWMA horizon and the
commit period of the reference rate. ``T`` must therefore be the flow's real
base round trip. A fixed data-centre value (tens of µs, right for 25-100 Gbit/s
fabrics) is far below the round trip of a 100 Mbit/s test bed, where one
1,500-byte frame alone takes 120 µs to serialise and a WAN link adds
milliseconds: ``B * T`` then is smaller than one packet, every queued packet
reads as a utilisation of several times the line rate, and rates collapse to the
minimum while the links are nearly idle.

The base RTT here is what an unloaded path costs: on every link of the flow's
path, there and back, the propagation delay plus the store-and-forward time of
one MTU-sized frame at the link's rate. With several equal-cost paths the
longest counts (the flow may take any of them).
"""
from __future__ import annotations

from controller.topology import Topology
from controller.topology.errors import RoutingError
from controller.topology.routing import paths


def link_one_way_s(rate_mbps: float, delay_ms: float, mtu: int) -> float:
    """Propagation plus serialisation of one MTU frame on one link direction."""
    return delay_ms / 1e3 + mtu * 8.0 / (rate_mbps * 1e6)


def path_base_rtt_s(topo: Topology, src: str, dst: str) -> float:
    """Base round trip between hosts ``src`` and ``dst``: the data path one way and
    back (links are symmetric), longest over the equal-cost paths.

    Raises ``RoutingError`` when a host is unknown or unreachable.
    """
    worst = 0.0
    for p in paths(topo, src, dst):
        one_way = 0.0
        for hop in p:
            ln = topo.link(hop.link)
            one_way += link_one_way_s(ln.rate_mbps, ln.delay_ms, ln.mtu)
        worst = max(worst, 2.0 * one_way)
    return worst


def flow_base_rtt_s(topo: Topology, src_host: str, dst_ip: str, *, floor_s: float) -> float:
    """HPCC ``T`` for a flow from host ``src_host`` to address ``dst_ip``: the path's
    base RTT, at least ``floor_s``. A destination outside the topology (or
    unreachable) gets the round trip of the sender's own link, at least ``floor_s``."""
    dst = next((h.name for h in topo.hosts if h.ipv4 == dst_ip), None)
    if dst is not None and dst != src_host:
        try:
            return max(floor_s, path_base_rtt_s(topo, src_host, dst))
        except RoutingError:
            pass
    own = max((2.0 * link_one_way_s(ln.rate_mbps, ln.delay_ms, ln.mtu)
               for ln in topo.links_of(src_host)), default=0.0)
    return max(floor_s, own)
