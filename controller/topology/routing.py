"""Routes, ECMP groups, neighbour tables, port roles and paths, computed from a topology.

Why: the controller installs these as table entries on every switch, the test bed
configures hosts from them, and the loss maps vote over the paths they give.  All
functions here are pure: a validated :class:`Topology` in, plain immutable data out,
deterministic order (sorted by switch, prefix and port), so tests compare tables.

Routing is layer 3 with hop count as the metric: every switch forwards on the IPv4
destination, rewriting the Ethernet source to its own router MAC and the destination to
the next switch's router MAC (or the host's MAC on the last hop).  Where several
neighbours are equally close to the destination, the route is an ECMP group.
"""
from __future__ import annotations

import ipaddress
import zlib
from collections import defaultdict, deque
from dataclasses import dataclass

from .errors import RoutingError, did_you_mean
from .model import Host, LinkRole, Topology

__all__ = [
    "DirectedLink",
    "EcmpGroup",
    "Hop",
    "HostConfig",
    "Neighbour",
    "NextHop",
    "PortConfig",
    "Route",
    "arp_proxy_entries",
    "directed_links",
    "ecmp_groups",
    "host_configs",
    "node_names_by_id",
    "path_link_indices",
    "path_links",
    "paths",
    "pick_next_hop",
    "port_configs",
    "port_queue_pkts",
    "port_rates_mbps",
    "port_roles",
    "routes",
    "switch_distances",
    "switch_neighbours",
]

MAX_PATHS = 256  # enough for any emulated fabric; stops a runaway enumeration


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class NextHop:
    """One way out of a switch towards a destination."""

    port: int          # egress port on this switch
    neighbour: str     # the node at the far end of the link
    dst_mac: str       # Ethernet destination to write (next switch's router MAC, or host MAC)
    src_mac: str       # Ethernet source to write (this switch's router MAC)
    link: str          # link name, "s1:3-s2:1"


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """An IPv4 prefix at one switch; ``group_id`` > 0 when ``next_hops`` is an ECMP group."""

    switch: str
    prefix: str
    next_hops: tuple[NextHop, ...]
    group_id: int = 0

    @property
    def is_ecmp(self) -> bool:
        return len(self.next_hops) > 1


@dataclass(frozen=True, slots=True, kw_only=True)
class EcmpGroup:
    """A set of equal-cost next hops used by one or more routes of a switch."""

    switch: str
    group_id: int
    next_hops: tuple[NextHop, ...]


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Neighbour:
    """A node directly attached to a switch port."""

    port: int
    name: str
    mac: str
    ip: str            # host address, or "" for a switch
    role: LinkRole


@dataclass(frozen=True, slots=True, kw_only=True)
class HostConfig:
    """What a host needs so the routed fabric can reach it and it can reach the others.

    Switches do not forward ARP, so every address a host talks to on its own subnet
    (its gateway and same-subnet hosts elsewhere) gets a static ARP entry pointing at its
    switch's router MAC; everything else goes via the default route to the gateway.
    """

    name: str
    intf: str
    ip_cidr: str
    mac: str
    gateway_ip: str
    gateway_mac: str
    arp: tuple[tuple[str, str], ...]   # (ip, mac), sorted by ip
    mtu: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Hop:
    """One directed traversal of a link: from ``src`` port to ``dst`` port."""

    link: str
    src: str
    src_port: int
    dst: str
    dst_port: int

    def __str__(self) -> str:
        return f"{self.src}:{self.src_port}->{self.dst}:{self.dst_port}"


def _switch_adjacency(topo: Topology) -> dict[str, list[tuple[int, str, int, str]]]:
    """switch -> [(port, neighbour switch, neighbour port, link name)] sorted by port."""
    switches = set(topo.switch_names)
    adj: dict[str, list[tuple[int, str, int, str]]] = {s: [] for s in switches}
    for ln in topo.links:
        if ln.a.node in switches and ln.b.node in switches:
            adj[ln.a.node].append((ln.a.port, ln.b.node, ln.b.port, ln.name))
            adj[ln.b.node].append((ln.b.port, ln.a.node, ln.a.port, ln.name))
    for lst in adj.values():
        lst.sort()
    return adj


def switch_distances(topo: Topology) -> dict[str, dict[str, int]]:
    """Hop counts between switches: ``d[target][switch]`` (unreachable pairs are absent)."""
    adj = _switch_adjacency(topo)
    out: dict[str, dict[str, int]] = {}
    for target in topo.switch_names:
        dist = {target: 0}
        todo = deque([target])
        while todo:
            node = todo.popleft()
            for _, nbr, _, _ in adj[node]:
                if nbr not in dist:
                    dist[nbr] = dist[node] + 1
                    todo.append(nbr)
        out[target] = dist
    return out


def _host_next_hops(topo: Topology) -> dict[str, dict[str, tuple[NextHop, ...]]]:
    """switch -> host -> next hops (empty tuple if the host is unreachable)."""
    adj = _switch_adjacency(topo)
    dist = switch_distances(topo)
    macs = {s.name: s.router_mac for s in topo.switches}
    out: dict[str, dict[str, tuple[NextHop, ...]]] = {s: {} for s in topo.switch_names}
    host_link = {ln.a.node: ln for ln in topo.links if ln.role is LinkRole.HOST}
    for h in topo.hosts:
        dist_t = dist[h.switch]
        for sw in topo.switch_names:
            if sw == h.switch:
                hops: tuple[NextHop, ...] = (NextHop(
                    port=h.port, neighbour=h.name, dst_mac=h.mac.lower(), src_mac=macs[sw],
                    link=host_link[h.name].name),)
            elif sw not in dist_t:
                hops = ()
            else:
                hops = tuple(
                    NextHop(port=port, neighbour=nbr, dst_mac=macs[nbr], src_mac=macs[sw],
                            link=link)
                    for port, nbr, _, link in adj[sw]
                    if dist_t.get(nbr, -1) == dist_t[sw] - 1)
            out[sw][h.name] = hops
    return out


def routes(topo: Topology, *, aggregate: bool = True) -> dict[str, list[Route]]:
    """Per switch, the IPv4 routes to every host, with ECMP group ids.

    With ``aggregate``, the hosts of a subnet that are all reached the same way (same
    next hops, not directly attached) share one subnet route instead of one /32 each.
    """
    per_host = _host_next_hops(topo)
    subnets: dict[ipaddress.IPv4Network, list[Host]] = defaultdict(list)
    for h in topo.hosts:
        subnets[h.subnet].append(h)
    out: dict[str, list[Route]] = {}
    for sw in topo.switch_names:
        pending: list[tuple[str, tuple[NextHop, ...]]] = []
        for net, members in subnets.items():
            sets = {per_host[sw][h.name] for h in members}
            direct = any(h.switch == sw for h in members)
            if aggregate and len(sets) == 1 and not direct and len(members) > 1:
                hops = next(iter(sets))
                if hops:
                    pending.append((str(net), hops))
                continue
            for h in members:
                if per_host[sw][h.name]:
                    pending.append((f"{h.ipv4}/32", per_host[sw][h.name]))
        groups = _group_ids(hops for _, hops in pending)
        rts = [Route(switch=sw, prefix=prefix, next_hops=hops, group_id=groups.get(hops, 0))
               for prefix, hops in pending]
        rts.sort(key=lambda r: (ipaddress.IPv4Network(r.prefix).network_address,
                                ipaddress.IPv4Network(r.prefix).prefixlen))
        out[sw] = rts
    return out


def _group_ids(hop_sets) -> dict[tuple[NextHop, ...], int]:
    ids: dict[tuple[NextHop, ...], int] = {}
    for hops in sorted({h for h in hop_sets if len(h) > 1}):
        ids[hops] = len(ids) + 1
    return ids


def ecmp_groups(topo: Topology, *, aggregate: bool = True) -> dict[str, list[EcmpGroup]]:
    """Per switch, the ECMP groups its routes refer to (ids from 1, stable)."""
    out: dict[str, list[EcmpGroup]] = {}
    for sw, rts in routes(topo, aggregate=aggregate).items():
        seen: dict[int, EcmpGroup] = {}
        for r in rts:
            if r.group_id and r.group_id not in seen:
                seen[r.group_id] = EcmpGroup(switch=sw, group_id=r.group_id,
                                             next_hops=r.next_hops)
        out[sw] = [seen[k] for k in sorted(seen)]
    return out


def switch_neighbours(topo: Topology) -> dict[str, list[Neighbour]]:
    """Per switch, who is on each of its ports (sorted by port)."""
    hosts = {h.name: h for h in topo.hosts}
    macs = {s.name: s.router_mac for s in topo.switches}
    out: dict[str, list[Neighbour]] = {s: [] for s in topo.switch_names}
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            if near.node not in out:
                continue
            h = hosts.get(far.node)
            out[near.node].append(Neighbour(
                port=near.port, name=far.node, mac=h.mac.lower() if h else macs[far.node],
                ip=h.ipv4 if h else "", role=ln.role))
    for lst in out.values():
        lst.sort()
    return out


def host_configs(topo: Topology) -> dict[str, HostConfig]:
    """Per host: address, gateway and static ARP entries (see :class:`HostConfig`)."""
    macs = {s.name: s.router_mac for s in topo.switches}
    mtu = {ln.a.node: ln.mtu for ln in topo.links if ln.role is LinkRole.HOST}
    out: dict[str, HostConfig] = {}
    for h in topo.hosts:
        gw_mac = macs[h.switch]
        arp = {h.gateway_ip: gw_mac}
        for other in topo.hosts:
            if other.name != h.name and other.interface.ip in h.subnet:
                arp[other.ipv4] = gw_mac
        out[h.name] = HostConfig(
            name=h.name, intf=h.intf_name, ip_cidr=str(h.interface), mac=h.mac.lower(),
            gateway_ip=h.gateway_ip, gateway_mac=gw_mac,
            arp=tuple(sorted(arp.items(), key=lambda kv: ipaddress.IPv4Address(kv[0]))),
            mtu=mtu.get(h.name, 1500))
    return out


def port_roles(topo: Topology) -> dict[str, dict[int, LinkRole]]:
    """Per switch, the role of each used port: host ports get INT source/sink duty,
    fabric and WAN ports carry the link sequence header."""
    return {sw: {n.port: n.role for n in nbrs} for sw, nbrs in switch_neighbours(topo).items()}


def _per_port(topo: Topology, attr: str) -> dict[str, dict[int, float]]:
    switches = set(topo.switch_names)
    out: dict[str, dict[int, float]] = {s: {} for s in topo.switch_names}
    for ln in topo.links:
        for ep in ln.endpoints():
            if ep.node in switches:
                out[ep.node][ep.port] = getattr(ln, attr)
    return {sw: dict(sorted(ports.items())) for sw, ports in out.items()}


def port_rates_mbps(topo: Topology) -> dict[str, dict[int, float]]:
    """Per switch, each port's line rate (the link's rate) for the traffic manager."""
    return _per_port(topo, "rate_mbps")


def port_queue_pkts(topo: Topology) -> dict[str, dict[int, int]]:
    """Per switch, each port's egress queue depth in packets."""
    return {sw: {p: int(v) for p, v in ports.items()}
            for sw, ports in _per_port(topo, "queue_pkts").items()}


def paths(topo: Topology, src: str, dst: str) -> list[tuple[Hop, ...]]:
    """Every shortest path from host ``src`` to host ``dst`` as directed hops, host links
    included; one path per ECMP choice, sorted.  Raises if a host is unknown or
    unreachable."""
    hosts = {h.name: h for h in topo.hosts}
    for name in (src, dst):
        if name not in hosts:
            raise RoutingError(f"topology {topo.name}: no host {name!r}"
                               + did_you_mean(name, hosts))
    if src == dst:
        return [()]
    nh = _host_next_hops(topo)
    hs = hosts[src]
    first_link = topo.link_at(hs.name, 0)
    first = Hop(link=first_link.name, src=hs.name, src_port=0, dst=hs.switch,
                dst_port=hs.port)
    far_port = {(ln.name, ep.node): ln.other(ep.node).port
                for ln in topo.links for ep in ln.endpoints()}
    found: list[tuple[Hop, ...]] = []

    def walk(sw: str, acc: tuple[Hop, ...]) -> None:
        if len(found) >= MAX_PATHS:
            return
        hops = nh[sw][dst]
        if not hops:
            raise RoutingError(f"topology {topo.name}: no route from {src} to {dst} "
                               f"(switch {sw} cannot reach {hosts[dst].switch})")
        for n in hops:
            step = Hop(link=n.link, src=sw, src_port=n.port, dst=n.neighbour,
                       dst_port=far_port[(n.link, sw)])
            if n.neighbour == dst:
                found.append(acc + (step,))
            else:
                walk(n.neighbour, acc + (step,))

    walk(hs.switch, (first,))
    return sorted(found, key=lambda p: [str(h) for h in p])


def path_links(topo: Topology, src: str, dst: str) -> list[str]:
    """Names of the links any shortest path from ``src`` to ``dst`` may cross (sorted)."""
    return sorted({hop.link for p in paths(topo, src, dst) for hop in p})


def node_names_by_id(topo: Topology) -> dict[int, str]:
    """INT node ID -> switch name, to name the hops of decoded telemetry."""
    return {s.int_node_id: s.name for s in topo.switches}


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectedLink:
    """One direction of a link, named by its ends ("s1:3->s5:3").

    Loss counters and loss events are kept by the receiving switch per ingress port, so
    (``dst_node_id``, ``dst_port``) is the key the loss maps use for this direction.
    """

    name: str
    link: str
    src: str
    src_port: int
    dst: str
    dst_port: int
    dst_node_id: int     # INT node ID of the receiving switch, 0 when a host receives
    role: LinkRole


def directed_links(topo: Topology, *, roles: tuple[LinkRole, ...] = (LinkRole.FABRIC,
                                                                      LinkRole.WAN)
                   ) -> list[DirectedLink]:
    """Both directions of every link with one of ``roles``, sorted by name (stable rows
    for link x time matrices).  By default the switch-to-switch links, which carry
    the link sequence header."""
    ids = {s.name: s.int_node_id for s in topo.switches}
    out = []
    for ln in topo.links:
        if ln.role not in roles:
            continue
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            out.append(DirectedLink(name=f"{near}->{far}", link=ln.name, src=near.node,
                                    src_port=near.port, dst=far.node, dst_port=far.port,
                                    dst_node_id=ids.get(far.node, 0), role=ln.role))
    return sorted(out, key=lambda d: (d.src, d.src_port, d.dst, d.dst_port))


def path_link_indices(topo: Topology, src: str, dst: str,
                      links: list[DirectedLink]) -> list[list[int]]:
    """For each shortest path from ``src`` to ``dst``, the rows in ``links`` it crosses
    (hops on links not in ``links`` are left out), for voting over paths."""
    row = {d.name: i for i, d in enumerate(links)}
    return [[row[str(h)] for h in p if str(h) in row] for p in paths(topo, src, dst)]


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class PortConfig:
    """Everything a switch port needs from the topology, in one row.

    Host ports are the INT domain's edge (source on ingress, sink on egress); fabric
    and WAN ports push and pop the link sequence header.
    """

    port: int
    role: LinkRole
    peer: str            # node at the far end
    peer_port: int
    rate_mbps: float
    queue_pkts: int
    mtu: int
    link: str

    @property
    def int_edge(self) -> bool:
        return self.role is LinkRole.HOST

    @property
    def link_seq(self) -> bool:
        return self.role is not LinkRole.HOST


def port_configs(topo: Topology) -> dict[str, list[PortConfig]]:
    """Per switch, one :class:`PortConfig` per used port, sorted by port."""
    out: dict[str, list[PortConfig]] = {s: [] for s in topo.switch_names}
    for ln in topo.links:
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            if near.node in out:
                out[near.node].append(PortConfig(
                    port=near.port, role=ln.role, peer=far.node, peer_port=far.port,
                    rate_mbps=ln.rate_mbps, queue_pkts=ln.queue_pkts, mtu=ln.mtu,
                    link=ln.name))
    for lst in out.values():
        lst.sort()
    return out


def arp_proxy_entries(topo: Topology) -> dict[str, list[tuple[str, str]]]:
    """Per switch, the (IPv4, MAC) pairs it answers ARP requests for on behalf of its
    hosts: each attached host's gateway and same-subnet peers, all resolving to the
    switch's router MAC (the same entries :func:`host_configs` gives as static ARP)."""
    out: dict[str, dict[str, str]] = {s: {} for s in topo.switch_names}
    cfgs = host_configs(topo)
    for h in topo.hosts:
        out[h.switch].update(cfgs[h.name].arp)
    return {sw: sorted(entries.items(), key=lambda kv: ipaddress.IPv4Address(kv[0]))
            for sw, entries in out.items()}


def pick_next_hop(route: Route, salt: int = 0) -> NextHop:
    """One next hop of ``route``, chosen by a stable hash of its prefix, for tables that
    take a single next hop per prefix: routes computed with ``aggregate=False`` (one
    per host) then spread over an ECMP group's members."""
    if len(route.next_hops) == 1:
        return route.next_hops[0]
    h = zlib.crc32(f"{route.switch}/{route.prefix}/{salt}".encode())
    return route.next_hops[h % len(route.next_hops)]
