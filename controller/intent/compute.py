"""Topology -> every switch's entries for p4/int_rocev2.p4 (names from p4/README.md).

Why pure: the result is data (`DesiredState` per switch) that the P4Runtime layer
reconciles; it can be printed, diffed and tested without a switch.

ECMP: `ipv4_lpm` takes one next hop per prefix (the program has no action selector),
so routes are computed per host (/32) and the destinations sharing an ECMP group take
its members in turn (round robin in address order: stable, and balanced even for two
destinations, which a hash is not).
"""
from __future__ import annotations

import dataclasses
import ipaddress
from collections.abc import Iterable

from controller.p4rt.entries import CloneSession, DesiredState, TableEntry
from controller.topology import (
    LinkRole,
    Topology,
    TopologyError,
    arp_proxy_entries,
    pick_next_hop,
    port_configs,
    routes,
)

from .errors import IntentError
from .options import CollectorSpec, IntentOptions, SinkMode

T_LPM = "SwitchIngress.ipv4_lpm"
T_ARP = "SwitchIngress.arp_proxy"
T_WATCH = "SwitchIngress.int_watchlist"
T_SINK = "SwitchIngress.int_sink"
T_SWITCH = "SwitchEgress.switch_config"
T_RATE = "SwitchEgress.port_line_rate"
T_MTU = "SwitchEgress.port_mtu"
T_FABRIC = "SwitchEgress.fabric_port"
T_ECN = "SwitchEgress.ecn_config"
T_REPORT = "SwitchEgress.report_config"
T_REPORT_TO = "SwitchEgress.report_collector"


def _collector_path(topo: Topology, spec: CollectorSpec) -> tuple[str, str, dict[str, tuple[int, str]]]:
    """(collector ip, collector mac, switch -> (egress port, next-hop MAC))."""
    host_routes = routes(topo, aggregate=False)
    if spec.host:
        try:
            h = topo.host(spec.host)
        except (TopologyError, KeyError) as exc:
            raise IntentError(f"collector host {spec.host!r}: {exc}") from None
        ip, mac = h.ipv4, h.mac.lower()
        out: dict[str, tuple[int, str]] = {}
        for sw, rts in host_routes.items():
            for r in rts:
                if r.prefix == f"{ip}/32":
                    nh = pick_next_hop(r)
                    out[sw] = (nh.port, nh.dst_mac)
        return ip, mac, out
    if not (spec.ip and spec.mac and spec.switch and spec.port):
        raise IntentError("collector: give a topology host, or ip, mac, switch and port")
    if spec.switch not in topo.switch_names:
        raise IntentError(f"collector: switch {spec.switch!r} not in the topology {topo.switch_names}")
    # the collector hangs off spec.switch:spec.port; the others reach it through the
    # switch graph (breadth first from that switch: each switch's port towards it)
    macs = {s.name: s.router_mac for s in topo.switches}
    out = {spec.switch: (spec.port, spec.mac.lower())}
    frontier = [spec.switch]
    while frontier:
        nxt = []
        for near in frontier:
            for ln in sorted(topo.links, key=lambda x: x.name):
                if ln.role is LinkRole.HOST or near not in (ln.a.node, ln.b.node):
                    continue
                far, far_port = (ln.b.node, ln.b.port) if ln.a.node == near else (ln.a.node, ln.a.port)
                if far in macs and far not in out:
                    out[far] = (far_port, macs[near])
                    nxt.append(far)
        frontier = nxt
    return spec.ip, spec.mac.lower(), out


def routing_topology(topo: Topology, avoid: Iterable[str] = ()) -> Topology:
    """``topo`` without the links named in ``avoid`` (either order of the ends): the
    graph routes are computed on while a mitigation keeps traffic off those links."""
    gone = set()
    for name in avoid:
        ln = topo.link(name)      # RoutingError (a TopologyError) for an unknown link
        if ln.role is LinkRole.HOST:
            raise IntentError(f"cannot route around host link {ln.name}")
        gone.add(ln.name)
    if not gone:
        return topo
    return dataclasses.replace(topo, links=tuple(ln for ln in topo.links if ln.name not in gone))


def compute_intent(topo: Topology, options: IntentOptions | None = None, *,
                   avoid: Iterable[str] = ()) -> dict[str, DesiredState]:
    """Per switch name, the entries, default actions and clone sessions it should hold.

    ``avoid``: link names the routes (and the reports' way to the collector) must not
    use; the ports keep their configuration (rate, MTU, link sequence numbers), so the
    link's loss counters keep working when traffic returns to it."""
    opts = options or IntentOptions()
    rtopo = routing_topology(topo, avoid)
    host_routes = routes(rtopo, aggregate=False)
    arp = arp_proxy_entries(topo)
    ports = port_configs(topo)
    collectors = [(spec, *_collector_path(rtopo, spec)) for spec in opts.collectors]
    if len({(c[1], c[0].udp_port) for c in collectors}) < len(collectors):
        raise IntentError("collectors: the same address and UDP port given twice "
                          f"{[f'{c[1]}:{c[0].udp_port}' for c in collectors]}")
    out: dict[str, DesiredState] = {}
    base = int(ipaddress.IPv4Address(opts.report_switch_ip_base))
    for sw in topo.switches:
        st = DesiredState()
        e = st.entries.append
        e(TableEntry.make(T_SWITCH, action="SwitchEgress.set_switch_config",
                          params={"node_id": sw.int_node_id}, is_default=True))
        turn: dict[tuple[object, ...], int] = {}
        for r in host_routes[sw.name]:
            k = turn.get(r.next_hops, 0)
            turn[r.next_hops] = k + 1
            nh = r.next_hops[k % len(r.next_hops)]
            e(TableEntry.make(T_LPM, {"dst_addr": r.prefix}, "SwitchIngress.ipv4_forward",
                              {"port": nh.port, "src_mac": nh.src_mac, "dst_mac": nh.dst_mac}))
        for ip, mac in arp[sw.name]:
            e(TableEntry.make(T_ARP, {"target_ip": ip}, "SwitchIngress.arp_reply", {"mac": mac}))
        has_hosts = False
        for pc in ports[sw.name]:
            e(TableEntry.make(T_RATE, {"port": pc.port}, "SwitchEgress.set_line_rate",
                              {"line_rate_mbps": max(1, round(pc.rate_mbps))}))
            e(TableEntry.make(T_MTU, {"egress_port": pc.port}, "SwitchEgress.set_mtu", {"mtu": pc.mtu}))
            if opts.ecn is not None:
                e(TableEntry.make(T_ECN, {"egress_port": pc.port}, "SwitchEgress.set_ecn_thresholds",
                                  {"kmin_bytes": opts.ecn.kmin_bytes, "kmax_bytes": opts.ecn.kmax_bytes,
                                   "pmax": opts.ecn.pmax}))
            if pc.role in (LinkRole.FABRIC, LinkRole.WAN):
                e(TableEntry.make(T_FABRIC, {"egress_port": pc.port}, "SwitchEgress.set_fabric"))
            elif pc.role is LinkRole.HOST:
                has_hosts = True
                action = "SwitchIngress.sink_report" if opts.sink_mode is SinkMode.REPORT \
                    else "SwitchIngress.sink_host"
                e(TableEntry.make(T_SINK, {"egress_port": pc.port}, action))
        if has_hosts:
            for w in opts.watch:
                match = {k: v for k, v in (("src_addr", w.src_addr), ("dst_addr", w.dst_addr),
                                           ("src_port", w.src_port), ("dst_port", w.dst_port),
                                           ("dscp", w.dscp)) if v is not None}
                e(TableEntry.make(T_WATCH, match, "SwitchIngress.int_source",
                                  {"instruction_bitmap": w.instruction_bitmap,
                                   "ds_instruction": w.ds_instruction, "max_hops": w.max_hops},
                                  priority=w.priority))
        routed: set[str] = set()
        for spec, cip, _cmac, path in collectors:
            if not spec.host and sw.name in path and cip not in routed:
                # a collector outside the topology: reports are routed to it like any packet
                routed.add(cip)
                port, next_mac = path[sw.name]
                e(TableEntry.make(T_LPM, {"dst_addr": f"{cip}/32"}, "SwitchIngress.ipv4_forward",
                                  {"port": port, "src_mac": sw.router_mac, "dst_mac": next_mac}))
        if collectors and opts.sink_mode is SinkMode.REPORT:
            # one report clone per collector: replica instance (egress_rid) 1 is the
            # primary (report_config), 2, 3, ... the standbys (report_collector)
            replicas = []
            for rid, (spec, cip, _cmac, path) in enumerate(collectors, start=1):
                if sw.name not in path:
                    raise IntentError(f"switch {sw.name}: no route to the collector {cip}")
                port, next_mac = path[sw.name]
                replicas.append((port, rid))
                if rid == 1:
                    e(TableEntry.make(T_REPORT, action="SwitchEgress.set_report_config", params={
                        "switch_mac": sw.router_mac, "collector_mac": next_mac,
                        "switch_ip": str(ipaddress.IPv4Address(base + (sw.device_id & 0xFFFF))),
                        "collector_ip": cip, "collector_port": spec.udp_port,
                        "payload_bytes": opts.report_payload_bytes, "hw_id": sw.device_id & 0x3F},
                        is_default=True))
                else:
                    e(TableEntry.make(T_REPORT_TO, {"egress_rid": rid}, "SwitchEgress.set_report_collector",
                                      {"collector_mac": next_mac, "collector_ip": cip,
                                       "collector_port": spec.udp_port}))
            st.clone_sessions.append(CloneSession(session_id=opts.report_clone_session,
                                                  replicas=tuple(replicas)))
        out[sw.name] = st
    return out
