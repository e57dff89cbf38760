"""Consistency and range checks of a topology; every problem is reported at once.

Why: a wrong port or an out-of-range delay found after thirty switch processes have
started costs minutes and hides the cause.  :func:`validate` runs without root on the
data alone and raises :class:`TopologyValidationError` listing each problem with the
object, the field and the bad value ("link s1:3-s2:1: port 3 of s1 used twice ...").
Out-of-range shaping is rejected, never clamped.
"""
from __future__ import annotations

import ipaddress
import re
from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from types import MappingProxyType

from common.loss import LossKind

from .errors import TopologyValidationError, did_you_mean
from .model import DROP_PORT, HOST_PORT, Link, LinkRole, Topology

__all__ = ["INT_MAX_BYTES", "LIMITS", "LINKSEQ_BYTES", "problems", "validate"]

IFNAMSIZ = 15
LINKSEQ_BYTES = 6                       # link sequence header (formats/FORMATS.md)
INT_MAX_BYTES = 4 + 12 + 8 * 28         # shim + MD header + 8 hops of the HPCC profile
MAX_FRAME_BYTES = 9000                  # largest frame the switches carry

# (low, high) inclusive ranges of link fields
LIMITS: Mapping[str, tuple[float, float]] = MappingProxyType({
    "rate_mbps": (0.001, 100_000.0),
    "delay_ms": (0.0, 200.0),
    "jitter_ms": (0.0, 200.0),
    "mtu": (576, MAX_FRAME_BYTES - 14),
    "queue_pkts": (1, 100_000),
})
_NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")
_MAC_RE = re.compile(r"^([0-9A-Fa-f]{2}:){5}[0-9A-Fa-f]{2}$")
_GRPC_RE = re.compile(r"^(?P<host>[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:]+\]):(?P<port>[0-9]{1,5})$")


def validate(topo: Topology) -> Topology:
    """Return ``topo`` unchanged if it is consistent, else raise listing every problem."""
    found = problems(topo)
    if found:
        raise TopologyValidationError(found)
    return topo


def problems(topo: Topology) -> list[str]:
    """Every problem of ``topo`` as a message; empty when it is valid."""
    out: list[str] = []
    _check_names(topo, out)
    _check_switches(topo, out)
    _check_hosts(topo, out)
    _check_links(topo, out)
    if not out:  # reachability only makes sense once the parts are sound
        _check_connected(topo, out)
    return out


def _check_names(topo: Topology, out: list[str]) -> None:
    seen: dict[str, str] = {}
    for kind, names in (("switch", topo.switch_names), ("host", topo.host_names)):
        for name in names:
            if not _NAME_RE.match(name):
                out.append(f"{kind} {name!r}: name must be a letter then letters, digits or _")
            # Mininet names interfaces "<node>-eth<port>"; keep room for 3-digit ports
            if len(name) + len("-eth") + 3 > IFNAMSIZ:
                out.append(f"{kind} {name}: name longer than {IFNAMSIZ - 7} characters "
                           f"(interface names <node>-eth<port> must fit in {IFNAMSIZ})")
            if name in seen:
                out.append(f"{kind} {name}: name used twice (also a {seen[name]})")
            seen[name] = kind


def _unique(out: list[str], what: str, items: Sequence[tuple[str, object]]) -> None:
    owner: dict[object, str] = {}
    for obj, value in items:
        if value in owner:
            out.append(f"{obj}: {what} {value} used twice (also by {owner[value]})")
        else:
            owner[value] = obj


def _check_switches(topo: Topology, out: list[str]) -> None:
    for sw in topo.switches:
        where = f"switch {sw.name}"
        if not 0 <= sw.device_id < 2**64:
            out.append(f"{where}: device_id {sw.device_id} out of range 0..2^64-1")
        if not 0 <= sw.int_node_id < 2**32:
            out.append(f"{where}: node_id {sw.node_id} out of range 0..2^32-1")
        if not 0 <= sw.cpu_port < DROP_PORT:
            out.append(f"{where}: cpu_port {sw.cpu_port} out of range 0..{DROP_PORT - 1} "
                       f"(v1model ports are 9 bits, {DROP_PORT} is the drop port)")
        m = _GRPC_RE.match(sw.grpc_addr)
        unix = sw.grpc_addr.startswith("unix:/") and "\0" not in sw.grpc_addr
        if not unix and (not m or not 1 <= int(m["port"]) <= 65535):
            out.append(f"{where}: grpc_addr {sw.grpc_addr!r} is not host:port "
                       "(port 1..65535), e.g. 127.0.0.1:50001, or unix:/ABSOLUTE/PATH")
        if sw.mac and not _is_unicast_mac(sw.mac):
            out.append(f"{where}: mac {sw.mac!r} is not a unicast MAC aa:bb:cc:dd:ee:ff")
    _unique(out, "device_id", [(f"switch {s.name}", s.device_id) for s in topo.switches])
    _unique(out, "node_id", [(f"switch {s.name}", s.int_node_id) for s in topo.switches])
    _unique(out, "grpc_addr", [(f"switch {s.name}", s.grpc_addr) for s in topo.switches])
    _unique(out, "mac", [(f"switch {s.name}", s.router_mac) for s in topo.switches]
            + [(f"host {h.name}", h.mac.lower()) for h in topo.hosts])


def _is_unicast_mac(mac: str) -> bool:
    return bool(_MAC_RE.match(mac)) and not int(mac[:2], 16) & 1 and mac != "00:00:00:00:00:00"


def _check_hosts(topo: Topology, out: list[str]) -> None:
    switches = set(topo.switch_names)
    ips: list[tuple[str, object]] = []
    for h in topo.hosts:
        where = f"host {h.name}"
        try:
            iface = h.interface
        except ValueError:
            out.append(f"{where}: ip {h.ip!r} is not an IPv4 address[/prefixlen]")
            iface = None
        if iface is not None:
            ips.append((where, iface.ip))
            if iface.ip in (iface.network.network_address, iface.network.broadcast_address) \
                    and iface.network.prefixlen < 31:
                out.append(f"{where}: ip {h.ip} is the network or broadcast address of "
                           f"{iface.network}")
            try:
                gw = ipaddress.IPv4Address(h.gateway_ip)
                if gw not in iface.network:
                    out.append(f"{where}: gateway {gw} is outside its subnet {iface.network}")
                elif gw == iface.ip:
                    out.append(f"{where}: gateway {gw} is the host's own address")
            except ValueError:
                out.append(f"{where}: gateway {h.gateway!r} is not an IPv4 address")
        if not _is_unicast_mac(h.mac):
            out.append(f"{where}: mac {h.mac!r} is not a unicast MAC aa:bb:cc:dd:ee:ff")
        if h.switch not in switches:
            out.append(f"{where}: switch {h.switch!r} does not exist"
                       + did_you_mean(h.switch, switches))
    _unique(out, "ip", ips)
    gateways = set()
    for h in topo.hosts:
        try:
            gateways.add(h.gateway_ip)
        except ValueError:
            pass  # reported above
    for where, ip in ips:
        if str(ip) in gateways:
            out.append(f"{where}: ip {ip} is also a gateway address (give the host another "
                       "address or set 'gateway' on the hosts of that subnet)")


def _check_link_ranges(ln: Link, out: list[str]) -> None:
    where = f"link {ln.name}"
    for fld in ("rate_mbps", "delay_ms", "jitter_ms", "mtu", "queue_pkts"):
        lo, hi = LIMITS[fld]
        value = getattr(ln, fld)
        if not lo <= value <= hi:
            out.append(f"{where}: {fld} {value} out of range {lo:g}..{hi:g}")
    if ln.jitter_ms > ln.delay_ms:
        out.append(f"{where}: jitter_ms {ln.jitter_ms} is larger than delay_ms {ln.delay_ms} "
                   "(delay minus jitter would be negative)")
    if ln.role is not LinkRole.HOST and ln.mtu + 14 + LINKSEQ_BYTES > MAX_FRAME_BYTES:
        out.append(f"{where}: mtu {ln.mtu} plus Ethernet and link sequence headers exceeds "
                   f"{MAX_FRAME_BYTES}-byte frames")
    loss = ln.loss
    params = {LossKind.NONE: (), LossKind.BERNOULLI: ("p",),
              LossKind.GILBERT_ELLIOTT: ("p", "r", "h", "k")}[loss.kind]
    for name in params:
        value = getattr(loss, name)
        if not 0.0 <= value <= 1.0:
            out.append(f"{where}: loss {loss.kind} {name} {value} out of range 0..1")
    if loss.kind is LossKind.GILBERT_ELLIOTT and loss.p > 0 and loss.r == 0:
        out.append(f"{where}: loss gilbert-elliott r is 0 with p > 0: the link would stay in "
                   "the bad state for ever")


def _check_links(topo: Topology, out: list[str]) -> None:
    switches = {s.name: s for s in topo.switches}
    hosts = {h.name: h for h in topo.hosts}
    used: dict[tuple[str, int], str] = {}
    host_links: dict[str, list[Link]] = defaultdict(list)
    for ln in topo.links:
        where = f"link {ln.name}"
        _check_link_ranges(ln, out)
        ends_ok = True
        for ep in ln.endpoints():
            if ep.node in hosts:
                host_links[ep.node].append(ln)
                if ep.port != HOST_PORT:
                    out.append(f"{where}: host end {ep} must use port {HOST_PORT} "
                               f"(a host has one interface, {ep.node}-eth{HOST_PORT})")
            elif ep.node in switches:
                sw = switches[ep.node]
                if not 0 <= ep.port < DROP_PORT:
                    out.append(f"{where}: port {ep.port} of {ep.node} out of range "
                               f"0..{DROP_PORT - 1}")
                elif ep.port == sw.cpu_port:
                    out.append(f"{where}: port {ep.port} of {ep.node} is its cpu_port")
            else:
                ends_ok = False
                out.append(f"{where}: node {ep.node!r} does not exist"
                           + did_you_mean(ep.node, [*switches, *hosts]))
            key = (ep.node, ep.port)
            if key in used:
                out.append(f"{where}: port {ep.port} of {ep.node} used twice "
                           f"(also by link {used[key]})")
            else:
                used[key] = ln.name
        if ln.a.node == ln.b.node:
            out.append(f"{where}: both ends are on {ln.a.node}")
            continue
        if not ends_ok:
            continue
        n_hosts = sum(ep.node in hosts for ep in ln.endpoints())
        if n_hosts == 2:
            out.append(f"{where}: joins two hosts; hosts attach to switches")
        elif n_hosts == 1 and ln.role is not LinkRole.HOST:
            out.append(f"{where}: role {ln.role} but one end is a host (use role host)")
        elif n_hosts == 0 and ln.role is LinkRole.HOST:
            out.append(f"{where}: role host but both ends are switches (use fabric or wan)")
    for h in topo.hosts:
        links = host_links.get(h.name, [])
        if not links:
            out.append(f"host {h.name}: no link (it says switch {h.switch} port {h.port})")
        elif len(links) > 1:
            out.append(f"host {h.name}: {len(links)} links ({', '.join(x.name for x in links)}); "
                       "a host has exactly one")
        else:
            far = links[0].other(h.name)
            if (far.node, far.port) != (h.switch, h.port):
                out.append(f"host {h.name}: says switch {h.switch} port {h.port} but its link "
                           f"{links[0].name} ends at {far}")
    host_mtu = max((ln.mtu for ln in topo.links if ln.role is LinkRole.HOST), default=0)
    for ln in topo.links:
        if ln.role is not LinkRole.HOST and host_mtu and ln.mtu < host_mtu + INT_MAX_BYTES:
            out.append(f"link {ln.name}: mtu {ln.mtu} leaves no room for INT: needs >= "
                       f"{host_mtu + INT_MAX_BYTES} (largest host mtu {host_mtu} + "
                       f"{INT_MAX_BYTES} bytes of INT for 8 hops)")


def _check_connected(topo: Topology, out: list[str]) -> None:
    if not topo.switches:
        out.append(f"topology {topo.name}: no switches")
        return
    adj: dict[str, set[str]] = defaultdict(set)
    for ln in topo.links:
        adj[ln.a.node].add(ln.b.node)
        adj[ln.b.node].add(ln.a.node)
    start = topo.switches[0].name
    seen = {start}
    todo = deque([start])
    while todo:
        node = todo.popleft()
        for nxt in adj[node] - seen:
            seen.add(nxt)
            todo.append(nxt)
    for name in [*topo.switch_names, *topo.host_names]:
        if name not in seen:
            out.append(f"node {name}: not connected to {start} (no path of links)")
