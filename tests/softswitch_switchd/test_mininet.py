"""The Mininet switch classes: a SoftSwitch node between two Mininet hosts, programmed
over P4Runtime from this process; BMv2 gives a clear message when it is missing."""
from __future__ import annotations

import secrets
import shutil
import socket

import pytest
from switchd_helpers import IPV4_FORWARD, P4RtClient

from mininet_topos.switches import Bmv2Switch, P4SwitchError, SoftSwitch, wait_for_grpc


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.root
@pytest.mark.mininet
def test_softswitch_node_forwards_between_mininet_hosts(tmp_path) -> None:
    from mininet.net import Mininet
    from mininet.topo import Topo

    tag = secrets.token_hex(2)
    h1n, h2n, s1n = f"tsd{tag}h1", f"tsd{tag}h2", f"tsd{tag}s1"
    grpc_port = _free_port()

    class T(Topo):
        def build(self) -> None:
            s = self.addSwitch(s1n, cls=SoftSwitch, p4_program=str(IPV4_FORWARD), device_id=7,
                               grpc_port=grpc_port, log_dir=str(tmp_path), dpid="7",
                               queue_rates_mbps={2: 50.0}, queue_depths_pkts={2: 32})
            for i, h in enumerate((h1n, h2n), start=1):
                self.addHost(h, ip=f"10.0.0.{i}/24", mac=f"00:00:00:00:00:0{i}")
                self.addLink(h, s, port2=i)

    net = Mininet(topo=T(), controller=None, autoSetMacs=False, build=False)
    try:
        net.build()
        net.start()
        net.staticArp()
        sw = net.get(s1n)
        assert sw.inNamespace
        cl = P4RtClient(f"127.0.0.1:{grpc_port}", 7)
        try:
            cl.set_pipeline(IPV4_FORWARD)
            for i in (1, 2):
                cl.write(cl.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000000 + i, 32)},
                                        "MyIngress.ipv4_forward", {"dstAddr": i, "port": i}))
            out = net.get(h1n).cmd("ping -c 3 -i 0.2 -W 2 10.0.0.2")
            assert " 0% packet loss" in out, out + sw.log_file.read_text()
        finally:
            cl.close()
        import time
        time.sleep(1.2)
        st = sw.stats()
        p2 = next(p for p in st["ports"] if p["port"] == 2)
        assert p2["queue_rate_bps"] == 50e6 and p2["queue_size_pkts"] == 32
        assert p2["tx_packets"] >= 3
    finally:
        net.stop()


def test_wait_for_grpc_names_the_address_when_nothing_answers() -> None:
    with pytest.raises(P4SwitchError, match=r"s9: no P4Runtime server on 127.0.0.1:\d+ after 1 s"):
        wait_for_grpc(f"127.0.0.1:{_free_port()}", timeout_s=1, what="s9")


@pytest.mark.mininet
def test_bmv2_switch_missing_or_missing_program() -> None:
    if shutil.which("simple_switch_grpc") is None:
        with pytest.raises(P4SwitchError, match="simple_switch_grpc is not installed.*use SoftSwitch"):
            Bmv2Switch("s1", grpc_port=9559, p4_program="x.json")
    else:  # BMv2 compiles a .p4 itself (p4c, cached); a missing source is named
        with pytest.raises(P4SwitchError, match="s1: P4 program x.p4: no such file"):
            Bmv2Switch("s1", grpc_port=9559, p4_program="x.p4")
