"""Which switch ports can build a queue under the workload: where a tiny buffer bites.

Why: a buffer cut to one packet drops only when packets arrive faster than the port
sends them.  A port whose data comes through one ingress at the same line rate, from a
host that paces its sends, never holds more than the packet it is sending: shrinking
its buffer changes nothing (a scoring trial once injected exactly that, and nothing
could be seen, because nothing happened).  Packets arrive faster than the port drains
where flows from two ingress ports meet (fan-in), or where the hop before releases
them in bursts faster than the line rate: a host (its sender writes several packets at
a time to an interface nobody shapes) or a WAN delay line (it forwards in batches).
A shaped router port in between smooths a burst back to its own line rate (its token
bucket lets only two frames through back to back): the next port of the same rate
then has nothing to queue.  (A scoring run measured it: a one-packet buffer at the
first router after a host or after the WAN dropped 60-170 packets in a trial, one two
shaped hops after the host none.)

Which ECMP path each flow took is not known on kernel routers; the paths kept are
those whose every switch egress port sent data in the warm-up.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from controller.topology.model import LinkRole, Topology
from controller.topology.routing import Hop, paths

__all__ = ["queueing_ports"]


def queueing_ports(topo: Topology, data_ports: Iterable[tuple[str, int]],
                   ring: Sequence[str]) -> list[tuple[str, int]]:
    """The switch ports (``(switch, port)``) where a ring collective over the hosts
    ``ring`` (rank r sends to rank r+1) can queue: fed by two ingress ports, or right
    after a host or a WAN link.  ``data_ports``: the ports that sent data in the
    warm-up."""
    data = set(data_ports)
    switches = set(topo.switch_names)
    roles = {}
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            roles[(near.node, near.port, far.node, far.port)] = ln.role
    feeds: dict[tuple[str, int], set[tuple[str, int]]] = {}
    bursty: set[tuple[str, int]] = set()
    n = len(ring)
    for r in range(n if n > 1 else 0):
        for path in paths(topo, ring[r], ring[(r + 1) % n]):
            if not _taken(path, data, switches):
                continue
            for prev, hop in pairwise(path):
                port = (hop.src, hop.src_port)
                feeds.setdefault(port, set()).add((prev.dst, prev.dst_port))
                if roles.get((prev.src, prev.src_port, prev.dst, prev.dst_port)) in (
                        LinkRole.WAN, LinkRole.HOST):
                    bursty.add(port)
    return sorted(p for p in data if p[0] in switches
                  and (len(feeds.get(p, ())) >= 2 or p in bursty))


def _taken(path: tuple[Hop, ...], data: set[tuple[str, int]], switches: set[str]) -> bool:
    """Whether the warm-up's traffic is consistent with ``path`` (every switch port on
    it sent data)."""
    return all((h.src, h.src_port) in data for h in path if h.src in switches)
