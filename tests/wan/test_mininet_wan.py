"""MininetWanLink between two Mininet hosts: delay seen by ping, clean teardown."""
import os
import re

import pytest

from common.loss import LossModel
from mininet_topos.wan import MininetWanLink, WanParams
from tests.helpers.stall_probe import StallProbe

pytestmark = [pytest.mark.root, pytest.mark.mininet]


def test_mininet_wan_link_delay_loss_and_teardown():
    from mininet.net import Mininet

    net = Mininet(topo=None, build=False, controller=None)
    link = None
    try:
        h1 = net.addHost("twnh1", ip="10.97.0.1/24")
        h2 = net.addHost("twnh2", ip="10.97.0.2/24")
        link = net.addLink(h1, h2, cls=MininetWanLink, mtu=2000,
                           wan=WanParams(delay_ms=10.0, loss=LossModel.none()))
        net.build()
        for h in (h1, h2):
            h.cmd(f"ethtool -K {h.defaultIntf()} tx off")
        h1.cmd("ping -c 1 -W 2 10.97.0.2")  # ARP
        with StallProbe() as probe:  # the machine's own stalls meanwhile
            out = h1.cmd("ping -D -c 5 -i 0.2 -W 2 10.97.0.2")
        got = [(float(t), float(rtt)) for t, rtt in
               re.findall(r"\[([0-9.]+)\].*time=([0-9.]+) ms", out)]
        assert len(got) == 5, out
        # two one-way delays of 10 ms; lateness a stall of the machine explains is not
        # the line's (tests/helpers/stall_probe.py)
        line = [probe.line_delay_ms(int((t - rtt / 1e3) * 1e9), int(t * 1e9), 20.0)
                for t, rtt in got]
        assert abs(sorted(line)[2] - 20.0) < 2.0, (got, line)
        assert link.wan.params().delay_ms == 10.0
        # the link's MTU holds end to end: 1972 + 28 bytes of headers, not fragmented
        out = h1.cmd("ping -c 1 -W 2 -M do -s 1972 10.97.0.2")
        assert "1 received" in out, out
        link.wan.update(loss=LossModel.bernoulli(1.0))
        out = h1.cmd("ping -c 2 -i 0.2 -W 1 10.97.0.2")
        assert "100% packet loss" in out
        assert link.wan.stats()["ab"]["lost"] >= 2
        ns_name = link._ns.name
    finally:
        net.stop()
    assert link is not None and not link.wan.running
    assert not os.path.exists(f"/var/run/netns/{ns_name}")
