"""Two real softswitch processes (s1, s2) in namespaces with a host behind each (h1, h2),
gRPC on 127.0.0.1, and the topology file the controller programs them from.

Used by the controller's end-to-end tests and the live view's browser test."""
from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import yaml

from common.kernel.netns import Interface, Namespace, delete_link, veth_pair

ROOT = Path(__file__).resolve().parents[2]
SO_NO_CHECK = 11


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Bed:
    """h1 - s1 - s2 - h2; ``prefix`` names the namespaces and veths."""

    def __init__(self, tmp: Path, prefix: str = "tct") -> None:
        self.tmp = tmp
        self.prefix = prefix
        self.ns: dict[str, Namespace] = {}
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.ports: dict[str, dict[int, str]] = {"s1": {}, "s2": {}}
        self.grpc = {"s1": f"127.0.0.1:{free_port()}", "s2": f"127.0.0.1:{free_port()}"}
        self.root_ends: list[Interface] = []
        self.collector_mac = ""

    def add_collector_link(self) -> None:
        """s2 port 3 <-> the root namespace (10.0.9.1/24): where the controller listens."""
        sw_end, root_end = veth_pair(self.ns["s2"], None, prefix=self.prefix, addr_b="10.0.9.1/24")
        self.root_ends.append(root_end)
        self.ports["s2"][3] = sw_end.ifname
        self.collector_mac = root_end.mac

    def build(self) -> Path:
        for n in ("h1", "h2", "s1", "s2"):
            ns = Namespace.create(self.prefix)
            self.ns[n] = ns
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        h1, s1a = veth_pair(self.ns["h1"], self.ns["s1"], prefix=self.prefix, addr_a="10.0.1.1/24")
        s1b, s2b = veth_pair(self.ns["s1"], self.ns["s2"], prefix=self.prefix, mtu=2000)
        s2a, h2 = veth_pair(self.ns["s2"], self.ns["h2"], prefix=self.prefix, addr_b="10.0.2.1/24")
        self.ports["s1"] = {1: s1a.ifname, 2: s1b.ifname}
        self.ports["s2"] = {1: s2a.ifname, 2: s2b.ifname}
        self.ns["h1"].run(["ip", "route", "add", "default", "via", "10.0.1.254"])
        self.ns["h2"].run(["ip", "route", "add", "default", "via", "10.0.2.254"])
        topo = {
            "name": f"{self.prefix}-pair",
            "switches": [{"name": "s1", "device_id": 1, "grpc_addr": self.grpc["s1"]},
                         {"name": "s2", "device_id": 2, "grpc_addr": self.grpc["s2"]}],
            "hosts": [{"name": "h1", "ip": "10.0.1.1/24", "mac": h1.mac, "switch": "s1", "port": 1},
                      {"name": "h2", "ip": "10.0.2.1/24", "mac": h2.mac, "switch": "s2", "port": 1}],
            "links": [{"a": "s1:2", "b": "s2:2", "role": "fabric", "rate_mbps": 100, "mtu": 2000}],
        }
        path = self.tmp / "pair.yaml"
        path.write_text(yaml.safe_dump(topo, sort_keys=False))
        return path

    def start_switch(self, name: str, device_id: int, *, target: str = "python") -> None:
        argv = [sys.executable, "-m", "softswitch", "switch", "--device-id", str(device_id),
                "--target", target,
                "--grpc-server-addr", self.grpc[name], "--netns", self.ns[name].name, "--name", name,
                "--log-file", str(self.tmp / f"{name}.log")]
        for port, ifname in sorted(self.ports[name].items()):
            argv += ["-i", f"{port}@{ifname}"]
        self.procs[name] = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def stop_switch(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def close(self) -> None:
        for n in list(self.procs):
            self.stop_switch(n)
        for ns in self.ns.values():
            ns.close()
        for end in self.root_ends:
            delete_link(end)
