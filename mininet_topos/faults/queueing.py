"""Where a fault can act on a ring collective: the components its traffic crosses, and
the switch ports where a tiny buffer bites.

Why: a fault on a component the workload does not cross, or one that changes nothing
there, has no effect: there is nothing to localise, and a scoring trial that injects
it only measures the harness.  Every place the harness picks is therefore on a rank
pair's path as the warm-up saw it (:func:`ring_paths`), and its ground truth names the
pairs that cross it (:func:`crossings`).

A buffer cut to one packet drops only when packets arrive faster than the port sends
them.  On this test bed that happens right after a host: its sender writes several
packets at a time into an interface nobody shapes, so they reach the first router in a
burst at memory speed, while the router port drains at its line rate (a scoring run:
35-210 tail drops per trial there).  It also happens where flows from two ingress
ports meet (fan-in: together they can arrive at twice the line rate).  It does not
happen behind a shaped port of the same rate: HTB lets at most two frames through back
to back, so the next port never holds more than the one it is sending.  Nor, by the
physics of the link, behind a WAN link of the same rate: the delay line serialises
every frame at the line rate before the delay (``mininet_topos.delayline``), so frames
leave it no faster than the next port drains them.  The bursts it does release come
from its process waking late on a loaded machine; they come and go with the load (a
one-packet buffer right after the WAN dropped 0-111 packets per trial across scoring
runs, and none in three trials of one run), so they make no fault to score.

Which ECMP path each flow took is not known on kernel routers; the paths kept are
those whose every switch egress port sent data in the warm-up.
"""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import pairwise

from controller.topology.model import LinkRole, Topology
from controller.topology.routing import Hop, paths

__all__ = ["crossings", "queueing_ports", "queueing_reasons", "ring_paths"]

Port = tuple[str, int]


def ring_paths(topo: Topology, data_ports: Iterable[Port], ring: Sequence[str]
               ) -> dict[tuple[str, str], list[tuple[Hop, ...]]]:
    """Each ring pair (rank r's host, rank r+1's host) with the paths its traffic may
    have taken: those of its ECMP paths whose every switch egress port is in
    ``data_ports`` (the ports that sent data in the warm-up).  No ring (fewer than two
    hosts), no pair."""
    data = set(data_ports)
    switches = set(topo.switch_names)
    n = len(ring)
    out: dict[tuple[str, str], list[tuple[Hop, ...]]] = {}
    for r in range(n if n > 1 else 0):
        pair = (ring[r], ring[(r + 1) % n])
        out[pair] = [p for p in paths(topo, *pair) if _taken(p, data, switches)]
    return out


def crossings(topo: Topology, data_ports: Iterable[Port], ring: Sequence[str]
              ) -> dict[str, list[str]]:
    """Component -> the ring pairs (``"h1->h3"``) whose traffic crosses it, in the
    diagnosis's names: link directions ``s1:1->s3:3`` (host links too), egress ports
    ``s3:3``, and the receiving hosts ``h3`` (a slow receiver delays the pair into it).
    A component no pair crosses is absent."""
    switches = set(topo.switch_names)
    out: dict[str, set[str]] = {}
    for (src, dst), ps in ring_paths(topo, data_ports, ring).items():
        name = f"{src}->{dst}"
        if ps:
            out.setdefault(dst, set()).add(name)
        for p in ps:
            for h in p:
                out.setdefault(str(h), set()).add(name)
                if h.src in switches:
                    out.setdefault(f"{h.src}:{h.src_port}", set()).add(name)
    return {k: sorted(v) for k, v in sorted(out.items())}


def queueing_reasons(topo: Topology, data_ports: Iterable[Port], ring: Sequence[str]
                     ) -> dict[Port, str]:
    """The switch ports where a ring collective over the hosts ``ring`` (rank r sends
    to rank r+1) can queue, each with why: fed straight by a host, or by two ingress
    ports.  ``data_ports``: the ports that sent data in the warm-up."""
    data = set(data_ports)
    switches = set(topo.switch_names)
    roles: dict[tuple[str, int, str, int], LinkRole] = {}
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            roles[(near.node, near.port, far.node, far.port)] = ln.role
    feeds: dict[Port, set[Port]] = {}
    after_host: dict[Port, str] = {}
    for ps in ring_paths(topo, data, ring).values():
        for path in ps:
            for prev, hop in pairwise(path):
                port = (hop.src, hop.src_port)
                feeds.setdefault(port, set()).add((prev.dst, prev.dst_port))
                if roles.get((prev.src, prev.src_port, prev.dst, prev.dst_port)) \
                        == LinkRole.HOST:
                    after_host[port] = prev.src
    out: dict[Port, str] = {}
    for port in sorted(p for p in data if p[0] in switches):
        if port in after_host:
            out[port] = f"first router port after host {after_host[port]} (unshaped sender)"
        elif len(feeds.get(port, ())) >= 2:
            ins = ", ".join(f"{s}:{p}" for s, p in sorted(feeds[port]))
            out[port] = f"fan-in from ingress ports {ins}"
    return out


def queueing_ports(topo: Topology, data_ports: Iterable[Port], ring: Sequence[str]
                   ) -> list[Port]:
    """The ports of :func:`queueing_reasons`, sorted."""
    return sorted(queueing_reasons(topo, data_ports, ring))


def _taken(path: tuple[Hop, ...], data: set[Port], switches: set[str]) -> bool:
    """Whether the warm-up's traffic is consistent with ``path`` (every switch port on
    it sent data)."""
    return all((h.src, h.src_port) in data for h in path if h.src in switches)
