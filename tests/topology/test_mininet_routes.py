"""The computed routes carry real traffic: the two-datacenter topology in Mininet with
Linux routers standing in for the P4 switches, WAN links through delay lines.

Each router gets exactly what the controller would install on a switch: per prefix the
next hops (ECMP as a multipath route), the Ethernet destination of each next hop (a
permanent neighbour entry), and its router MAC on every port; hosts get the static ARP
entries and default route of ``host_configs``.  Pings then show that routes, ECMP groups,
host configuration, the Mininet topology builder and the WAN links agree.
"""
import os
import re

import pytest

from common.loss import LossModel
from controller.topology import two_datacenters
from mininet_topos.topologies import linux_router_commands, mininet_network

pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]


def rtts(out):
    return [float(x) for x in re.findall(r"time=([0-9.]+) ms", out)]


def test_router_commands_follow_routes():
    cmds = linux_router_commands(two_datacenters(n_leaves=2, hosts_per_leaf=1), "s3")
    assert "ip link set dev s3-eth2 address 02:00:00:00:00:03 up" in cmds
    assert ("ip route replace 10.2.1.1/32 nexthop via 169.254.0.2 dev s3-eth2 onlink "
            "nexthop via 169.254.0.3 dev s3-eth3 onlink") in cmds
    assert len(cmds) == len(set(cmds))
    assert "ip neigh replace 10.1.1.1 lladdr 00:00:0a:01:01:01 dev s3-eth1 nud permanent" in cmds


def test_two_datacenters_routes_carry_pings_across_the_wan():
    topo = two_datacenters(n_leaves=2, hosts_per_leaf=1, wan_delay_ms=10.0,
                           wan_loss=[LossModel.none(), LossModel.none()])
    wan_links, namespaces = [], []
    with mininet_network(topo, wan_seed=3) as net:
        wan_links = [ln for ln in net.links if hasattr(ln, "wan")]
        namespaces = [ln.wan.netns for ln in wan_links]
        assert len(wan_links) == 2
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
    # teardown leaves nothing behind
    assert all(not ln.wan.running for ln in wan_links)
    assert not any(os.path.exists(f"/var/run/netns/{ns}") for ns in namespaces)
