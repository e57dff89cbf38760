"""The controller against real BMv2: two ``simple_switch_grpc`` processes, each in its
own network namespace between two hosts, started without a program; the controller
compiles p4/int_rocev2.p4 with p4c (cached), pushes the pipeline over P4Runtime and
programs both from a topology file.

    h1 --1[s1]2 ==fabric== 2[s2]1 -- h2

A RoCEv2 packet from h1 reaches h2 with INT inserted by s1 and kept for the host by
s2 (host sink mode): two hop records, s2's on top, with the node ids, ports and line
rates the controller programmed.  After s2 restarts empty, the controller pushes the
pipeline again and restores its entries; its link loss map (loss digests and
counters: PI reads no registers) says nothing was lost, and frames with sequence
numbers ahead, sent into the fabric link, come back from s2 as loss digests the
controller counts on that link.  In report mode, s2 sends a
Telemetry Report per packet to the controller's collector through a port into the
root namespace.
"""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from bmv2_helpers import ROOT, Bmv2Process, require_tools

from formats import int_md, roce

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

PREFIX = "tbm"
SO_NO_CHECK = 11
ETH_P_ALL = 0x0003
RATE_MBPS = 100
COLLECTOR_IP = "10.0.29.1"
LOSS_AT = 0x80000              # a sequence jump below the data plane's resync gap (0x100000)
LOSS_GAP = 5     # the root namespace's end of s2's port 3


class Bed:
    """Namespaces h1, s1, s2, h2 joined by veths; BMv2 in s1 and s2."""

    def __init__(self, tmp: Path, *, collector: bool = False) -> None:
        from common.kernel.netns import Namespace, veth_pair
        self.tmp = tmp
        self.ns = {}
        self.root_ends: list = []
        self.collector_mac = ""
        try:
            for n in ("h1", "s1", "s2", "h2"):
                ns = Namespace.create(PREFIX)
                self.ns[n] = ns
                for key in ("all", "default"):
                    ns.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1"], check=False)
            self.h1, s1a = veth_pair(self.ns["h1"], self.ns["s1"], prefix=PREFIX, addr_a="10.0.1.1/24")
            s1b, s2b = veth_pair(self.ns["s1"], self.ns["s2"], prefix=PREFIX, mtu=2000)
            self.fabric_s1 = s1b.ifname
            s2a, self.h2 = veth_pair(self.ns["s2"], self.ns["h2"], prefix=PREFIX, addr_b="10.0.2.1/24")
            self.ns["h1"].run(["ip", "route", "add", "default", "via", "10.0.1.254"])
            self.ns["h2"].run(["ip", "route", "add", "default", "via", "10.0.2.254"])
            s2_ports = {1: s2a.ifname, 2: s2b.ifname}
            if collector:   # s2 port 3 <-> the root namespace, where the controller listens
                sw_end, root_end = veth_pair(self.ns["s2"], None, prefix=PREFIX,
                                             addr_b=f"{COLLECTOR_IP}/24")
                self.root_ends.append(root_end)
                s2_ports[3] = sw_end.ifname
                self.collector_mac = root_end.mac
            self.switches = {
                "s1": Bmv2Process("s1", self.ns["s1"], 1, {1: s1a.ifname, 2: s1b.ifname}, tmp),
                "s2": Bmv2Process("s2", self.ns["s2"], 2, s2_ports, tmp),
            }
        except BaseException:
            self.close()
            raise

    def topology(self) -> Path:
        topo = {
            "name": "tbm-pair",
            "switches": [{"name": n, "device_id": sw.device_id, "grpc_addr": sw.grpc_addr}
                         for n, sw in self.switches.items()],
            "hosts": [{"name": "h1", "ip": "10.0.1.1/24", "mac": self.h1.mac, "switch": "s1", "port": 1},
                      {"name": "h2", "ip": "10.0.2.1/24", "mac": self.h2.mac, "switch": "s2", "port": 1}],
            "links": [{"a": "s1:2", "b": "s2:2", "role": "fabric", "rate_mbps": RATE_MBPS, "mtu": 2000}],
        }
        path = self.tmp / "pair.yaml"
        path.write_text(yaml.safe_dump(topo, sort_keys=False))
        return path

    def close(self) -> None:
        from common.kernel.netns import delete_link
        for sw in getattr(self, "switches", {}).values():
            sw.stop()
        for ns in self.ns.values():
            ns.close()
        for end in self.root_ends:
            delete_link(end)


def _started(tmp_path: Path, **kw: bool) -> Iterator[Bed]:
    require_tools()
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    b = Bed(tmp_path, **kw)
    try:
        for sw in b.switches.values():
            sw.start()
        yield b
    finally:
        b.close()


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    yield from _started(tmp_path)


@pytest.fixture
def report_bed(tmp_path: Path) -> Iterator[Bed]:
    yield from _started(tmp_path, collector=True)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _send_udp(bed: Bed, payload: bytes, port: int) -> None:
    with bed.ns["h1"].enter():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with tx:
        tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        tx.bind(("10.0.1.1", 0))
        tx.sendto(payload, ("10.0.2.1", port))


def _frames_at_h2(bed: Bed, send: bytes, port: int, want, tries: int = 20) -> bytes | None:
    """Send ``send`` from h1 to h2:``port`` until h2's interface sees a frame ``want``
    accepts (the first packets may go to ARP resolution); return that frame."""
    with bed.ns["h2"].enter():
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    with raw:
        raw.bind((bed.h2.ifname, 0))
        raw.settimeout(0.5)
        for _ in range(tries):
            _send_udp(bed, send, port)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                try:
                    frame = raw.recv(65536)
                except TimeoutError:
                    break
                if want(frame):
                    return frame
    return None


def _udp_dport(frame: bytes) -> int | None:
    if len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] != 17:
        return None
    ihl = (frame[14] & 0x0F) * 4
    return int.from_bytes(frame[14 + ihl + 2:14 + ihl + 4], "big")


def test_controller_programs_bmv2_int_crosses_and_a_restart_is_restored(bed: Bed, tmp_path: Path) -> None:
    from controller.p4rt import Phase, Target, compile_bmv2_cached
    from controller.runner import Controller, RunConfig
    js, info = compile_bmv2_cached(ROOT / "p4" / "int_rocev2.p4")
    cfg = RunConfig(topology=str(bed.topology()), out_dir=str(tmp_path / "out"), report_port=0,
                    agent_port=0, status_interval_s=0.3, connect_timeout_s=20, target=Target.BMV2,
                    bmv2_json=str(js), p4info=str(info), int_instructions=0xD400)
    ctl = Controller(cfg=cfg).start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values()), \
            {n: st.error for n, st in ctl.status.items()}
        for sw in ctl.fleet.switches.values():
            assert sw.last_sync is not None and sw.last_sync.pipeline_pushed

        bth = bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x33, 0, 0, 0, 1])
        frame = _frames_at_h2(bed, bth + b"x" * 32, roce.ROCEV2_UDP_PORT,
                              lambda f: _udp_dport(f) == int_md.INT_UDP_PORT)
        assert frame is not None, (bed.tmp / "s1.log").read_text()[-2000:]
        hdr = int_md.parse_int(frame)
        assert hdr is not None and hdr.orig_dport == roce.ROCEV2_UDP_PORT
        assert hdr.instruction_bitmap == 0xD400
        assert [h.node_id for h in hdr.hops] == [2, 1]          # s2's record on top
        s2_hop, s1_hop = hdr.hops
        assert (s1_hop.ingress_port, s1_hop.egress_port) == (1, 2)
        assert (s2_hop.ingress_port, s2_hop.egress_port) == (2, 1)
        assert s1_hop.line_rate == RATE_MBPS                    # what the controller set
        assert s1_hop.egress_ts > 0 and s1_hop.queue_occupancy == 0
        assert frame.endswith(bth + b"x" * 32)                   # the packet itself intact

        # plain UDP is routed too (proxy ARP answered by the switches)
        plain = _frames_at_h2(bed, b"hello", 9000, lambda f: _udp_dport(f) == 9000)
        assert plain is not None and plain.endswith(b"hello")

        # s2 restarts empty: the controller pushes the pipeline and its entries again
        s2 = ctl.fleet.switches["s2"]
        before = ctl.restores.get("s2", 0)
        bed.switches["s2"].stop()
        bed.switches["s2"].start()
        end = time.monotonic() + 60
        while ctl.restores.get("s2", 0) <= before and time.monotonic() < end:
            time.sleep(0.1)
        assert ctl.restores.get("s2", 0) > before, s2.client.stats.stream_errors  # type: ignore[union-attr]
        assert s2.last_sync is not None and s2.last_sync.pipeline_pushed
        again = _frames_at_h2(bed, b"again", 9001, lambda f: _udp_dport(f) == 9001)
        assert again is not None and again.endswith(b"again")

        # counters read over P4Runtime: packets arrived on s2's fabric port
        from controller.runner.links import C_INGRESS
        s2c = s2.client
        assert s2c is not None
        assert s2c.read_counter(s2.schema.counter(C_INGRESS).id).get(2, (0, 0))[0] >= 1
        # link losses (loss digests; PI reads no registers): the restart's sequence
        # jump on s1 -> s2 is not counted as loss, nothing else was lost
        time.sleep(0.5)
        ctl.tick()
        losses = {r["link"]: r["lost"] for r in ctl.snapshot()["losses"]}
        assert losses == {"s1:2->s2:2": 0, "s2:2->s1:2": 0}, losses

        # a loss on the fabric link: frames with sequence numbers ahead of what s2
        # expects, sent into the link from s1's side; s2 counts the gaps and sends loss
        # digests, the controller's only loss source on BMv2.  (s1's BMv2 sees the
        # frames leave its port too, so the reverse link counts them as well.)
        assert ctl.links is not None
        events = ctl.links.events
        _send_link_seq(bed, [LOSS_AT, LOSS_AT + 1 + LOSS_GAP])
        lost, end = 0, time.monotonic() + 10
        while time.monotonic() < end:
            ctl.tick()
            lost = {r["link"]: r["lost"] for r in ctl.snapshot()["losses"]}["s1:2->s2:2"]
            if lost >= LOSS_AT - 1000 + LOSS_GAP:
                break
            time.sleep(0.2)
        assert ctl.links.events >= events + 2
        # the first jump is LOSS_AT less the few packets s1 sent since the restart
        assert LOSS_AT - 1000 + LOSS_GAP <= lost <= LOSS_AT + LOSS_GAP, lost
    finally:
        ctl.stop()


def _send_link_seq(bed: Bed, seqs: list[int]) -> None:
    """Frames with a link sequence header (EtherType 0x88B5, then an EtherType nobody
    routes) into the s1 -> s2 fabric link, as if s1 had sent them."""
    with bed.ns["s1"].enter():
        raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    with raw:
        raw.bind((bed.fabric_s1, 0))
        for seq in seqs:
            raw.send(bytes(6) + bytes.fromhex("020000000001") + (0x88B5).to_bytes(2, "big")
                     + seq.to_bytes(4, "big") + (0x88B6).to_bytes(2, "big") + bytes(46))
            time.sleep(0.05)


def test_bmv2_sends_telemetry_reports_to_the_running_controller(report_bed: Bed, tmp_path: Path) -> None:
    """Report mode: s2 strips INT for h2 and sends a Telemetry Report per packet through
    port 3 to the controller's collector, and a copy to a standby collector (another
    UDP port there) with its own unbroken sequence; flows, hops and line rates follow."""
    from controller.intent import CollectorSpec, SinkMode
    from controller.p4rt import Phase, Target, compile_bmv2_cached
    from controller.runner import Controller, RunConfig
    bed = report_bed
    js, info = compile_bmv2_cached(ROOT / "p4" / "int_rocev2.p4")
    cfg = RunConfig(topology=str(bed.topology()), out_dir=str(tmp_path / "out"), listen=COLLECTOR_IP,
                    report_port=_free_port(), agent_port=0, status_interval_s=0.3, connect_timeout_s=20,
                    target=Target.BMV2, bmv2_json=str(js), p4info=str(info),
                    sink_mode=SinkMode.REPORT, collector_ip=COLLECTOR_IP,
                    collector_mac=bed.collector_mac, collector_at=("s2", 3),
                    report_source_base="10.0.29.100", int_instructions=0xD400,
                    standby_collectors=(CollectorSpec(ip=COLLECTOR_IP, mac=bed.collector_mac,
                                                      switch="s2", port=3, udp_port=_free_port()),),
                    insecure=True)  # keyless on a private test link; the auth tests cover keys
    standby = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    standby.bind((COLLECTOR_IP, cfg.standby_collectors[0].udp_port))
    standby.settimeout(5)
    ctl = Controller(cfg=cfg).start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values()), \
            {n: st.error for n, st in ctl.status.items()}
        bth = bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x33, 0, 0, 0, 1])
        # h2 gets the packet as h1 sent it (INT stripped), on the RoCEv2 port
        frame = _frames_at_h2(bed, bth + b"y" * 32, roce.ROCEV2_UDP_PORT,
                              lambda f: _udp_dport(f) == roce.ROCEV2_UDP_PORT)
        assert frame is not None and frame.endswith(bth + b"y" * 32)
        collector = ctl.collector
        assert collector is not None
        end = time.monotonic() + 10
        while collector.stats().reports < 1 and time.monotonic() < end:
            time.sleep(0.05)
        assert collector.stats().reports >= 1, collector.stats()
        ctl.tick()
        state = ctl.snapshot()
        assert {(h["switch"], h["egress_port"]) for h in state["hops"]} == {("s1", 2), ("s2", 1)}
        assert all(h["line_rate_bps"] == RATE_MBPS * 1e6 for h in state["hops"])
        assert any((f["src"], f["dst"], f["qp"], f["path"]) == ("10.0.1.1", "10.0.2.1", 0x33, ["s1", "s2"])
                   for f in state["flows"]), state["flows"]
        assert state["collector"]["malformed"] == {}
        # the standby's copies: as many as the collector took, sequence 0, 1, ... (the
        # group header's low 22 bits), from s2's report source
        seqs = []
        while len(seqs) < collector.stats().reports:
            data, src = standby.recvfrom(2048)
            assert src[0] == "10.0.29.102"
            seqs.append(int.from_bytes(data[:4], "big") & 0x3FFFFF)
        assert seqs == list(range(len(seqs))), seqs
        assert [(s.received, s.lost) for s in collector.stats().switches] == [(len(seqs), 0)]
    finally:
        ctl.stop()
        standby.close()
