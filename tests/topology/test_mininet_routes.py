"""The computed routes carry real traffic: the two-datacenter topology in Mininet with
Linux routers standing in for the P4 switches, WAN links through delay lines.

Each router gets exactly what the controller would install on a switch: per prefix the
next hops (ECMP as a multipath route), the Ethernet destination of each next hop (a
permanent neighbour entry), and its router MAC on every port; hosts get the static ARP
entries and default route of ``host_configs``.  Pings then show that routes, ECMP groups,
host configuration, the Mininet topology builder and the WAN links agree.
"""
import re

import pytest

from controller.topology import LossModel, routes, two_datacenters
from mininet_topos.topologies import configure_hosts, mininet_topo

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]


def _router_class():
    from mininet.node import Host

    class LinuxRouter(Host):
        """A namespace that forwards IPv4; takes the switch options and ignores them."""

        def __init__(self, name, **params):
            for key in ("device_id", "grpc_addr", "grpc_port", "cpu_port", "node_id",
                        "queue_rates_mbps", "queue_depths_pkts", "dpid"):
                params.pop(key, None)
            params["inNamespace"] = True  # Mininet puts switches in the root namespace
            super().__init__(name, **params)

        def start(self, controllers):  # Mininet calls this on switches
            pass

    return LinuxRouter


def _check(node, cmd):
    out = node.cmd(cmd + " 2>&1; echo rc=$?").strip()
    assert out.endswith("rc=0"), f"{node.name}: {cmd}: {out}"


def program_routers(net, topo):
    """Install routes(topo) on the Linux routers, as the controller would on switches."""
    ids = {s.name: s.device_id for s in topo.switches}
    for sw in topo.switches:
        node = net.get(sw.name)
        assert node.inNamespace, f"{sw.name} would configure the root namespace"
        for cmd in ("ip link set lo up",  # creates the local table on-link gateways need
                    "sysctl -q -w net.ipv4.ip_forward=1",
                    "sysctl -q -w net.ipv4.conf.all.rp_filter=0",
                    "sysctl -q -w net.ipv4.conf.default.rp_filter=0",
                    "sysctl -q -w net.ipv4.conf.all.send_redirects=0",
                    "sysctl -q -w net.ipv6.conf.all.disable_ipv6=1"):
            _check(node, cmd)
        for intf in node.intfList():
            if intf.name != "lo":
                _check(node, f"ip link set dev {intf.name} address {sw.router_mac} up")
                _check(node, f"sysctl -q -w net.ipv4.conf.{intf.name}.rp_filter=0")
        for route in routes(topo)[sw.name]:
            hops = []
            for nh in route.next_hops:
                dev = f"{sw.name}-eth{nh.port}"
                if nh.neighbour in ids:  # a switch: a made-up on-link next hop address
                    via = f"169.254.0.{ids[nh.neighbour]}"
                    _check(node, f"ip neigh replace {via} lladdr {nh.dst_mac} dev {dev} "
                                 "nud permanent")
                    hops.append(f"nexthop via {via} dev {dev} onlink")
                else:  # the host itself
                    ip = route.prefix.split("/")[0]
                    _check(node, f"ip neigh replace {ip} lladdr {nh.dst_mac} dev {dev} "
                                 "nud permanent")
                    hops.append(f"nexthop dev {dev}")
            _check(node, f"ip route replace {route.prefix} {' '.join(hops)}")


def rtts(out):
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]


def test_two_datacenters_routes_carry_pings_across_the_wan():
    from mininet.net import Mininet

    topo = two_datacenters(n_leaves=2, hosts_per_leaf=1, wan_delay_ms=10.0,
                           wan_loss=[LossModel.none(), LossModel.none()])
    net = Mininet(topo=mininet_topo(topo, wan_seed=3), switch=_router_class(),
                  controller=None, autoSetMacs=False, build=False)
    wan_links = []
    try:
        net.build()
        wan_links = [ln for ln in net.links if hasattr(ln, "wan")]
        assert len(wan_links) == 2
        program_routers(net, topo)
        configure_hosts(net, topo)
        h1, h4 = net.get("h1"), net.get("h4")
        # inside dc1: h1 (leaf s3) -> h2 (leaf s4) over either spine, no WAN
        out = h1.cmd("ping -c 3 -i 0.2 -W 2 10.1.2.1")
        assert len(rtts(out)) == 3 and max(rtts(out)) < 10.0, out
        # across the WAN: two one-way delays of 10 ms
        for dst in ("10.2.1.1", "10.2.2.1"):
            out = h1.cmd(f"ping -c 4 -i 0.2 -W 2 {dst}")
            assert len(rtts(out)) == 4, out
            assert 19.0 < sorted(rtts(out))[1] < 23.0, out
        out = h4.cmd("ping -c 2 -i 0.2 -W 2 10.1.1.1")
        assert len(rtts(out)) == 2, out
        carried = sum(ln.wan.stats()["ab"]["tx_pkts"] + ln.wan.stats()["ba"]["tx_pkts"]
                      for ln in wan_links)
        assert carried >= 2 * (4 + 4 + 2)
    finally:
        net.stop()
    assert all(not ln.wan.running for ln in wan_links)
