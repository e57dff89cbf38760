"""The Mininet switch kind ``ebpf``: two kernel switches between Mininet hosts, programmed
over P4Runtime from this process, and nothing of them left in the kernel afterwards
(tc filters, programs, maps, shaping, the namespace name) whether the switch process
stops on SIGTERM or is killed."""
from __future__ import annotations

import secrets
import signal
import socket
import subprocess
import time

import pytest
from switchd_helpers import IPV4_FORWARD, P4RtClient

from mininet_topos.ebpf_switch import EbpfSoftSwitch, kernel_objects, objects_alive, stats_ports
from mininet_topos.switches import P4SwitchError

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.mininet]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _netns_names() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    return {ln.split()[0] for ln in out.splitlines() if ln.strip()}


def _alive_after(objs: dict, timeout_s: float = 5.0) -> list[str]:
    """Kernel objects of `objs` still there after up to `timeout_s` (freeing is deferred)."""
    deadline = time.monotonic() + timeout_s
    while (left := objects_alive(objs)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_ebpf_nodes_forward_shape_and_leave_nothing(tmp_path) -> None:
    from mininet.net import Mininet
    from mininet.topo import Topo

    tag = secrets.token_hex(2)
    h1n, h2n, s1n, s2n = (f"teb{tag}{n}" for n in ("h1", "h2", "s1", "s2"))
    ports = {s1n: _free_port(), s2n: _free_port()}

    class T(Topo):
        def build(self) -> None:
            for dev, s in enumerate((s1n, s2n), start=1):
                self.addSwitch(s, cls=EbpfSoftSwitch, p4_program=str(IPV4_FORWARD), device_id=dev,
                               grpc_port=ports[s], log_dir=str(tmp_path), dpid=str(dev),
                               queue_rates_mbps={2: 50.0}, queue_depths_pkts={2: 32})
            self.addHost(h1n, ip="10.0.0.1/24", mac="00:00:00:00:00:01")
            self.addHost(h2n, ip="10.0.0.2/24", mac="00:00:00:00:00:02")
            self.addLink(h1n, s1n, port2=1)
            self.addLink(s1n, s2n, port1=2, port2=1)
            self.addLink(s2n, h2n, port1=2)

    net = Mininet(topo=T(), controller=None, autoSetMacs=False, build=False)
    try:
        net.build()
        net.start()
        net.staticArp()
        s1, s2 = net.get(s1n), net.get(s2n)
        names = {s1.netns_name, s2.netns_name}
        assert None not in names and names <= _netns_names()
        for sw in (s1, s2):
            cl = P4RtClient(sw.grpc_addr, sw.device_id)
            try:
                cl.set_pipeline(IPV4_FORWARD)
                for i in (1, 2):
                    cl.write(cl.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (0x0A000000 + i, 32)},
                                            "MyIngress.ipv4_forward", {"dstAddr": i, "port": i}))
            finally:
                cl.close()
        out = net.get(h1n).cmd("ping -c 3 -i 0.2 -W 2 10.0.0.2")
        assert " 0% packet loss" in out, out + s1.log_file.read_text() + s2.log_file.read_text()
        assert "ttl=62" in out, out            # both kernel programs decremented the TTL
        progs = {sw.name: sw.programs() for sw in (s1, s2)}
        for sw in (s1, s2):
            assert all(len(ids) == 1 for ids in progs[sw.name].values()), progs
            # the paced port is shaped at its queue's rate by the kernel
            assert "htb" in sw.cmd(f"tc qdisc show dev {sw.name}-eth2 root")
        objs = {n: kernel_objects({i for ids in p.values() for i in ids}) for n, p in progs.items()}
        for n, o in objs.items():
            assert len(o["prog"]) == 1 and len(o["map"]) >= 9, (n, o)
        assert stats_ports({"target": "ebpf", "queues": {"2": {"enqueued": 3}}}, "s1")[0] == {
            "port": 2, "ifname": "s1-eth2", "tx_packets": 3, "tail_drops": 0, "queue_high_water": 0,
            "queue_rate_bps": 0.0, "queue_size_pkts": 0}

        # s1 stops on SIGTERM: the process itself removes its filters and shaping
        s1._end()
        assert "removed what the stopped switch process left" not in s1.log_file.read_text()
        for ifname in s1.data_ports().values():
            assert "p4_" not in s1.cmd(f"tc filter show dev {ifname} ingress")
            assert "htb" not in s1.cmd(f"tc qdisc show dev {ifname} root")
        assert _alive_after(objs[s1n]) == []

        # s2 is killed: the node removes what it left, and the kernel frees the program
        assert s2.proc is not None
        s2.proc.send_signal(signal.SIGKILL)
        s2.proc.wait(10)
        assert objects_alive(objs[s2n])        # its filters still hold the program
        s2._end()
        assert "removed what the stopped switch process left: " \
               f"{s2n}-eth1: tc filter, {s2n}-eth2: tc filter, {s2n}-eth2: shaping" \
               in s2.log_file.read_text()
        assert _alive_after(objs[s2n]) == []
        assert not names & _netns_names()
    finally:
        net.stop()


def test_ebpf_node_refuses_a_capture_folder(tmp_path) -> None:
    with pytest.raises(P4SwitchError, match="s1: pcap_dir: the eBPF target captures no frames"):
        EbpfSoftSwitch("s1", grpc_port=1, pcap_dir=str(tmp_path))
