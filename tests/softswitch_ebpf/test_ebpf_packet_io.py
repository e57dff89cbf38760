"""Packet-in and packet-out on the eBPF target, through the switch process's CPU port
(a veth pair) and the real P4Runtime stream: a frame the kernel program sends to the
CPU port reaches the controller with its packet_in metadata; a PacketOut enters the
program on the CPU port and leaves the port its packet_out header names. The pair is
gone once the switch stops."""
from __future__ import annotations

import os
import queue
import select
import socket
import subprocess
import sys
import time

import pytest
from ebpf_helpers import ROOT

from common.kernel.netns import Namespace, veth_pair

pytestmark = [pytest.mark.bpf, pytest.mark.root]
# the bmv2 tier's packet-in/out program: CPU port 510, to_cpu by destination MAC
PROGRAM = ROOT / "tests" / "bmv2" / "p4" / "packet_io.p4"
TO_CPU_MAC = bytes.fromhex("02000000c0de")


def _quiet(ns: Namespace) -> None:
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)


def _to_cpu_entry(info):  # type: ignore[no-untyped-def]
    from p4.v1 import p4runtime_pb2 as P
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.forward")
    action = next(a for a in info.actions if a.preamble.name == "MyIngress.to_cpu")
    up = P.Update(type=P.Update.INSERT)
    te = up.entity.table_entry
    te.table_id = table.preamble.id
    m = te.match.add()
    m.field_id, m.exact.value = table.match_fields[0].id, TO_CPU_MAC
    te.action.action.action_id = action.preamble.id
    return up


def _receive(sock: socket.socket, marker: bytes, timeout_s: float) -> bytes | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.1)
        if ready:
            data = sock.recv(65536)
            if marker in data:
                return data
    return None


@pytest.mark.parametrize("outside", [False, True], ids=["inside", "netns-option"])
def test_packet_in_and_packet_out_through_the_cpu_port(tmp_path, outside: bool) -> None:
    """`outside`: the switch process runs in the caller's namespace with ``--netns``
    (its ports and the CPU port's pair in the switch's namespace)."""
    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    info = build_p4info(load_program(PROGRAM))
    out_meta = next(h for h in info.controller_packet_metadata if h.preamble.name == "packet_out")
    made: list[Namespace] = []
    proc = None
    try:
        h1, sw, h2 = (Namespace.create("tebc") for _ in range(3))
        made += [h1, sw, h2]
        for ns in made:
            _quiet(ns)
        a, s1 = veth_pair(h1, sw, prefix="tebc")
        s2, b = veth_pair(sw, h2, prefix="tebc")
        sock = tmp_path / "p4rt.sock"
        argv = [sys.executable, "-m", "softswitch", "switch", str(PROGRAM), "--target", "ebpf",
                "-i", f"1@{s1.ifname}", "-i", f"2@{s2.ifname}", "--device-id", "8",
                "--grpc-server-addr", f"unix:{sock}"]
        kw = {"cwd": str(ROOT), "env": dict(os.environ, PYTHONPATH=str(ROOT)),
              "stderr": subprocess.PIPE, "text": True}
        if outside:
            proc = subprocess.Popen([*argv, "--netns", sw.name], **kw)  # type: ignore[call-overload]
        else:
            proc = sw.popen(argv, **kw)
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "ebpf switch not ready in 60 s"
            time.sleep(0.05)
        links = sw.run(["ip", "-o", "link"]).stdout
        assert sum("p4cpu" in line for line in links.splitlines()) == 2, links   # the CPU port's pair
        with SwitchClient(name="s1", address=f"unix:{sock}", device_id=8) as cl:
            cl.connect()
            cl.write([_to_cpu_entry(info)])
            with h1.enter():
                tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((a.ifname, 0))
            frame = TO_CPU_MAC + bytes.fromhex(a.mac.replace(":", "")) + b"\x88\xb5to-the-controller"
            tx.send(frame)
            tx.close()
            try:
                pin = cl.packet_ins.get(timeout=10)
            except queue.Empty:
                raise AssertionError("no PacketIn within 10 s") from None
            assert pin.payload == frame
            assert [m.value for m in pin.metadata] == [b"\x01", b"\x00"]    # ingress_port 1, _pad
            # packet-out: the program runs it from the CPU port and sends it to port 2
            with h2.enter():
                rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            rx.bind((b.ifname, 0))
            out = bytes.fromhex("02000000beef") + bytes(6) + b"\x88\xb5from-the-controller"
            cl.packet_out(out, [(out_meta.metadata[0].id, b"\x02")])
            got = _receive(rx, b"from-the-controller", 10)
            rx.close()
            assert got == out
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        links = sw.run(["ip", "-o", "link"]).stdout
        assert "p4cpu" not in links, links
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()
