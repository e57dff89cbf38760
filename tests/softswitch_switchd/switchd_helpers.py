"""Test beds for the switch process: hosts and switch namespaces, switch processes,
and a minimal P4Runtime client on the generated stubs.

Layout of `chain(n)`: h1 -- s1 -- s2 ... sn -- h2; every switch uses port 1 towards
h1 and port 2 towards h2. Hosts share 10.0.0.0/24 and know each other's MAC
(static neighbours), so the IPv4 program needs no ARP. IPv6 is off everywhere so
no stray frames reach the switches.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from common.kernel.netns import Interface, Namespace, veth_pair

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
IPV4_FORWARD = ROOT / "p4" / "examples" / "ipv4_forward.p4"
PREFIX = "tsd"


def quiet_namespace() -> Namespace:
    ns = Namespace.create(PREFIX)
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
    return ns


@dataclass(slots=True, kw_only=True, eq=False)
class SwitchProc:
    """A switch process started by a test, in its own namespace."""

    ns: Namespace
    ports: dict[int, Interface]
    grpc_addr: str
    stats_file: Path
    log_file: Path
    proc: subprocess.Popen | None = None

    def start(self, program: Path | None = None, *extra: str, device_id: int = 1,
              timeout_s: float = 60.0) -> None:
        argv = [sys.executable, "-m", "softswitch", "switch"]
        if program is not None:
            argv.append(str(program))
        for num, end in sorted(self.ports.items()):
            argv += ["-i", f"{num}@{end.ifname}"]
        argv += ["--device-id", str(device_id), "--grpc-server-addr", self.grpc_addr,
                 "--stats-file", str(self.stats_file), "--log-file", str(self.log_file),
                 "-L", "info", *extra]
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = self.ns.popen(argv, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout_s
        while not self.stats_file.exists():
            if self.proc.poll() is not None:
                raise AssertionError(f"switch exited {self.proc.returncode}: "
                                     f"{self.proc.stderr.read().decode()} {self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"switch not ready after {timeout_s}s: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        return self.log_file.read_text() if self.log_file.exists() else ""

    def stats(self) -> dict:
        from softswitch.switchd import read_stats
        return read_stats(self.stats_file)

    def port_stats(self, port: int) -> dict:
        return next(p for p in self.stats()["ports"] if p["port"] == port)


@dataclass(slots=True, kw_only=True, eq=False)
class Chain:
    h1: Namespace
    h2: Namespace
    switches: list[SwitchProc] = field(default_factory=list)
    extra: list[Namespace] = field(default_factory=list)


@contextlib.contextmanager
def chain(tmp: Path, n: int = 1, *, mirror_ports: int = 0, mtu: int = 1500) -> Iterator[Chain]:
    """h1 -- s1 .. sn -- h2; with `mirror_ports`, s1 gets ports 3.. each to a sink namespace
    (in `Chain.extra`, addressed 10.0.0.(10+i), IPv4 up, no neighbours)."""
    made: list[Namespace] = []
    try:
        h1, h2 = quiet_namespace(), quiet_namespace()
        made += [h1, h2]
        sws = [quiet_namespace() for _ in range(n)]
        made += sws
        a, b = veth_pair(h1, sws[0], prefix=PREFIX, addr_a="10.0.0.1/24", mtu=mtu)
        h1.ifname, h1.ip, h1.mac = a.ifname, "10.0.0.1", a.mac
        ports: list[dict[int, Interface]] = [{1: b}] + [{} for _ in range(n - 1)]
        for i in range(n - 1):
            x, y = veth_pair(sws[i], sws[i + 1], prefix=PREFIX, mtu=mtu)
            ports[i][2], ports[i + 1][1] = x, y
        x, y = veth_pair(sws[-1], h2, prefix=PREFIX, addr_b="10.0.0.2/24", mtu=mtu)
        ports[-1][2] = x
        h2.ifname, h2.ip, h2.mac = y.ifname, "10.0.0.2", y.mac
        extra = []
        for i in range(mirror_ports):
            sink = quiet_namespace()
            made.append(sink)
            x, y = veth_pair(sws[0], sink, prefix=PREFIX, addr_b=f"10.0.0.{10 + i}/24")
            sink.ifname, sink.ip, sink.mac = y.ifname, y.ip or "", y.mac
            ports[0][3 + i] = x
            extra.append(sink)
        h1.run(["ip", "neigh", "replace", h2.ip, "lladdr", h2.mac, "dev", h1.ifname])
        h2.run(["ip", "neigh", "replace", h1.ip, "lladdr", h1.mac, "dev", h2.ifname])
        procs = [SwitchProc(ns=sw, ports=ports[i], grpc_addr=f"unix:{tmp}/s{i + 1}.sock",
                            stats_file=tmp / f"s{i + 1}.json", log_file=tmp / f"s{i + 1}.log")
                 for i, sw in enumerate(sws)]
        yield Chain(h1=h1, h2=h2, switches=procs, extra=extra)
    finally:
        for ns in reversed(made):
            ns.close()


# ------------------------------------------------------------ P4Runtime client
def encode(value: int, bits: int) -> bytes:
    """P4Runtime canonical bytes: big-endian, no leading zero bytes (0 is one zero byte)."""
    if value < 0 or value >= 1 << bits:
        raise ValueError(f"{value} does not fit in {bits} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


class P4RtClient:
    """Primary controller of one device over a StreamChannel."""

    def __init__(self, address: str, device_id: int, *, election_low: int = 1) -> None:
        self.channel = grpc.insecure_channel(address)
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.stub = PG.P4RuntimeStub(self.channel)
        self.device_id = device_id
        self.election = P.Uint128(high=0, low=election_low)
        import queue
        self._out: queue.Queue = queue.Queue()
        self.stream_in: queue.Queue = queue.Queue()
        self._stream = self.stub.StreamChannel(iter(self._out.get, None))
        import threading
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._out.put(P.StreamMessageRequest(arbitration=P.MasterArbitrationUpdate(
            device_id=device_id, election_id=self.election)))
        first = self.stream_in.get(timeout=10)
        assert first.HasField("arbitration"), first
        self.p4info: P4I.P4Info | None = None

    def _read(self) -> None:
        try:
            for msg in self._stream:
                self.stream_in.put(msg)
        except grpc.RpcError:
            pass

    def set_pipeline(self, program: Path, action: int = P.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT
                     ) -> P4I.P4Info:
        from softswitch.p4info import build_p4info
        from softswitch.targets.python.switch import Switch
        info = build_p4info(Switch.from_file(program).program.checked)
        cfg = P.ForwardingPipelineConfig(p4info=info, p4_device_config=program.read_bytes())
        self.stub.SetForwardingPipelineConfig(P.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=self.election, config=cfg,
            action=action), timeout=60)
        self.p4info = info
        return info

    def _obj(self, kind: str, name: str):
        assert self.p4info is not None
        for o in getattr(self.p4info, kind):
            if o.preamble.name == name or o.preamble.alias == name:
                return o
        raise KeyError(f"{kind} {name}")

    def write(self, *updates: P.Update) -> None:
        self.stub.Write(P.WriteRequest(device_id=self.device_id, election_id=self.election,
                                       updates=list(updates)), timeout=30)

    def table_entry(self, table: str, match: dict[str, object], action: str,
                    params: dict[str, int], *, priority: int = 0) -> P.Update:
        t = self._obj("tables", table)
        a = self._obj("actions", action)
        e = P.TableEntry(table_id=t.preamble.id, priority=priority)
        for mf in t.match_fields:
            if mf.name not in match:
                continue
            v = match[mf.name]
            fm = P.FieldMatch(field_id=mf.id)
            if mf.match_type == P4I.MatchField.EXACT:
                fm.exact.value = encode(int(v), mf.bitwidth)
            elif mf.match_type == P4I.MatchField.LPM:
                val, plen = v
                fm.lpm.value, fm.lpm.prefix_len = encode(val, mf.bitwidth), plen
            elif mf.match_type == P4I.MatchField.TERNARY:
                val, mask = v
                fm.ternary.value, fm.ternary.mask = encode(val, mf.bitwidth), encode(mask, mf.bitwidth)
            e.match.append(fm)
        e.action.action.action_id = a.preamble.id
        for p in a.params:
            e.action.action.params.append(P.Action.Param(param_id=p.id,
                                                         value=encode(params[p.name], p.bitwidth)))
        return P.Update(type=P.Update.INSERT, entity=P.Entity(table_entry=e))

    def packet_out(self, payload: bytes, **metadata: int) -> None:
        hdr = next(h for h in self.p4info.controller_packet_metadata
                   if h.preamble.name == "packet_out")
        po = P.PacketOut(payload=payload)
        for m in hdr.metadata:
            if m.name in metadata:
                po.metadata.append(P.PacketMetadata(metadata_id=m.id,
                                                    value=encode(metadata[m.name], m.bitwidth)))
        self._out.put(P.StreamMessageRequest(packet=po))

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()


def ipv4_routes(client: P4RtClient, h1_mac: str, h2_mac: str) -> None:
    """ipv4_forward.p4: 10.0.0.1 out of port 1 to h1, 10.0.0.2 out of port 2 to h2."""
    for ip, mac, port in ((0x0A000001, h1_mac, 1), (0x0A000002, h2_mac, 2)):
        client.write(client.table_entry("MyIngress.ipv4_lpm", {"hdr.ipv4.dstAddr": (ip, 32)},
                                        "MyIngress.ipv4_forward",
                                        {"dstAddr": int(mac.replace(":", ""), 16), "port": port}))


# ------------------------------------------------------------ host sockets
def udp_socket(ns: Namespace, port: int = 0):
    """A UDP socket living in `ns`, bound to `port` (0 = any)."""
    import socket
    with ns.enter():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    s.settimeout(5)
    return s


def raw_socket(ns: Namespace, ifname: str):
    """An AF_PACKET socket on `ifname` in `ns` (sees every frame arriving there)."""
    import socket
    with ns.enter():
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
        s.bind((ifname, 0))
    s.settimeout(0.2)
    return s


def collect(sock, seconds: float, want=lambda f: True) -> list[bytes]:
    """Frames arriving on `sock` (not sent by its host) for `seconds` that satisfy `want`."""
    import socket
    out, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            f, addr = sock.recvfrom(65535)
        except (TimeoutError, BlockingIOError):
            continue
        if addr[2] != socket.PACKET_OUTGOING and want(f):
            out.append(f)
    return out


def udp_frame(src: Namespace, dst: Namespace, dport: int, payload: bytes, sport: int = 4000) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    return bytes(Ether(src=src.mac, dst=dst.mac) / IP(src=src.ip, dst=dst.ip) /
                 UDP(sport=sport, dport=dport) / payload)
