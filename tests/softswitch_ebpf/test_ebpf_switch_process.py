"""The kernel switch between real veths in namespaces, and teardown of everything it
loaded: tc filters, the program and every map."""
from __future__ import annotations

import json
import socket
import time

import pytest
from ebpf_helpers import ROOT, start_switch_process

from common.kernel.netns import Namespace, veth_pair
from softswitch.backends.ebpf.kernel import object_exists
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"


def _gone(ids: dict[str, list[int]], timeout_s: float = 5.0) -> list[tuple[str, int]]:
    """Kernel objects of `ids` still alive after up to `timeout_s` (freeing is deferred)."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [(k, i) for k, lst in ids.items() for i in lst if object_exists(k, i)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def test_close_frees_program_and_every_map() -> None:
    sw = Switch.from_file(PROGRAM, target="ebpf")
    ids = sw.kernel.kernel_ids()
    assert len(ids["prog"]) == 1 and len(ids["map"]) >= 9   # 6 fixed maps + 3 of the table
    assert len(_gone(ids, 0)) == 1 + len(ids["map"])      # all alive while loaded
    sw.close()
    assert _gone(ids) == []


def _quiet(ns: Namespace) -> None:
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)


def test_switch_process_forwards_between_namespaces_and_cleans_up(tmp_path) -> None:
    made: list[Namespace] = []
    proc = None
    try:
        h1, sw, h2 = (Namespace.create("tebp") for _ in range(3))
        made += [h1, sw, h2]
        for ns in made:
            _quiet(ns)
        a, s1 = veth_pair(h1, sw, prefix="tebp", addr_a="10.7.0.1/24")
        s2, b = veth_pair(sw, h2, prefix="tebp", addr_b="10.7.0.2/24")
        h1.run(["ip", "neigh", "replace", "10.7.0.2", "lladdr", b.mac, "dev", a.ifname])
        h2.run(["ip", "neigh", "replace", "10.7.0.1", "lladdr", a.mac, "dev", b.ifname])
        entries = tmp_path / "routes.entries"
        entries.write_text(
            f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a070001/32 "
            f"MyIngress.ipv4_forward(dstAddr:0x{a.mac.replace(':', '')}, port:1)\n"
            f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a070002/32 "
            f"MyIngress.ipv4_forward(dstAddr:0x{b.mac.replace(':', '')}, port:2)\n")
        stats = tmp_path / "stats.json"
        proc = start_switch_process(sw, [str(PROGRAM), "--target", "ebpf", "--entries",
                                         str(entries), "-i", f"1@{s1.ifname}",
                                         "-i", f"2@{s2.ifname}", "--grpc-server-addr", "none",
                                         "--stats-file", str(stats)], stats)
        filters = sw.run(["tc", "filter", "show", "dev", s1.ifname, "ingress"]).stdout
        assert "p4_softswitch" in filters and "direct-action" in filters, filters
        res = h1.run(["ping", "-c", "3", "-i", "0.2", "-W", "3", "10.7.0.2"], check=False)
        assert res.returncode == 0, res.stdout + res.stderr
        assert "ttl=63" in res.stdout                      # the kernel program decremented the TTL
        with h2.enter():
            rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        rx.bind(("0.0.0.0", 4444))
        rx.settimeout(3)
        with h1.enter():
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for i in range(50):
                msg = f"datagram {i} ".encode() * 30
                tx.sendto(msg, ("10.7.0.2", 4444))
                assert rx.recv(4096) == msg
        finally:
            rx.close()
            tx.close()
        time.sleep(1.2)                                   # one statistics interval
        st = json.loads(stats.read_text())
        assert st["target"] == "ebpf" and st["tx"] >= 56 and st["no_port"] == 0, st
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        for ifname in (s1.ifname, s2.ifname):
            left = sw.run(["tc", "filter", "show", "dev", ifname, "ingress"], check=False).stdout
            assert "p4_softswitch" not in left, left
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()


def _route(info, dst: int, mac: str, port: int):
    from p4.v1 import p4runtime_pb2 as P
    table = next(t for t in info.tables if t.preamble.name == "MyIngress.ipv4_lpm")
    action = next(a for a in info.actions if a.preamble.name == "MyIngress.ipv4_forward")
    up = P.Update(type=P.Update.INSERT)
    te = up.entity.table_entry
    te.table_id = table.preamble.id
    m = te.match.add()
    m.field_id = table.match_fields[0].id
    m.lpm.value = dst.to_bytes(4, "big")
    m.lpm.prefix_len = 32
    te.action.action.action_id = action.preamble.id
    for p, value in zip(action.params, (bytes.fromhex(mac.replace(":", "")), port.to_bytes(2, "big"))):
        pa = te.action.action.params.add()
        pa.param_id, pa.value = p.id, value
    return up


def test_controller_installs_the_program_and_routes_over_p4runtime(tmp_path) -> None:
    """No program on the command line: the P4Runtime client sends it (compiled for the
    kernel by the switch) and writes the routes; frames then cross in the kernel."""
    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    info = build_p4info(load_program(PROGRAM))
    made: list[Namespace] = []
    proc = None
    try:
        h1, sw, h2 = (Namespace.create("tebq") for _ in range(3))
        made += [h1, sw, h2]
        for ns in made:
            _quiet(ns)
        a, s1 = veth_pair(h1, sw, prefix="tebq", addr_a="10.8.0.1/24")
        s2, b = veth_pair(sw, h2, prefix="tebq", addr_b="10.8.0.2/24")
        h1.run(["ip", "neigh", "replace", "10.8.0.2", "lladdr", b.mac, "dev", a.ifname])
        h2.run(["ip", "neigh", "replace", "10.8.0.1", "lladdr", a.mac, "dev", b.ifname])
        sock = tmp_path / "p4rt.sock"
        stats = tmp_path / "stats.json"
        proc = start_switch_process(sw, ["--target", "ebpf", "-i", f"1@{s1.ifname}",
                                         "-i", f"2@{s2.ifname}", "--device-id", "3",
                                         "--grpc-server-addr", f"unix:{sock}",
                                         "--stats-file", str(stats)], sock)
        with SwitchClient(name="s1", address=f"unix:{sock}", device_id=3) as cl:
            cl.connect()
            cl.set_pipeline(info, PROGRAM.read_bytes())
            cl.write([_route(info, 0x0A080001, a.mac, 1), _route(info, 0x0A080002, b.mac, 2)])
            res = h1.run(["ping", "-c", "3", "-i", "0.2", "-W", "3", "10.8.0.2"], check=False)
            assert res.returncode == 0, res.stdout + res.stderr
            assert "ttl=63" in res.stdout
            assert len(cl.read_table_entries()) == 2
            cl.set_pipeline(info, PROGRAM.read_bytes())      # a second push replaces the program
            res = h1.run(["ping", "-c", "2", "-i", "0.2", "-W", "2", "10.8.0.2"], check=False)
            assert res.returncode != 0                         # its tables start empty
            cl.write([_route(info, 0x0A080001, a.mac, 1), _route(info, 0x0A080002, b.mac, 2)])
            res = h1.run(["ping", "-c", "2", "-i", "0.2", "-W", "3", "10.8.0.2"], check=False)
            assert res.returncode == 0, res.stdout + res.stderr
        filters = sw.run(["tc", "filter", "show", "dev", s1.ifname, "ingress"]).stdout
        assert filters.count("p4_softswitch") == 1, filters  # the first program was detached
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        left = sw.run(["tc", "filter", "show", "dev", s1.ifname, "ingress"], check=False).stdout
        assert "p4_softswitch" not in left, left
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()


@pytest.mark.parametrize("hook", ["tc", "xdp"])
def test_digests_reach_the_p4runtime_client(tmp_path, hook: str) -> None:
    """A digest sent by the kernel program (on either hook) arrives as a DigestList on
    the stream."""
    import queue

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    program = ROOT / "tests" / "softswitch_ebpf" / "tlv.p4"
    info = build_p4info(load_program(program))
    made: list[Namespace] = []
    proc = None
    try:
        h1, sw = (Namespace.create("tebd") for _ in range(2))
        made += [h1, sw]
        for ns in made:
            _quiet(ns)
        a, s1 = veth_pair(h1, sw, prefix="tebd")
        sock = tmp_path / "p4rt.sock"
        proc = start_switch_process(sw, [str(program), "--target", "ebpf",
                                         "--hook", hook, "-i", f"3@{s1.ifname}",
                                         "--device-id", "4", "--grpc-server-addr",
                                         f"unix:{sock}"], sock)
        with SwitchClient(name="s1", address=f"unix:{sock}", device_id=4) as cl:
            cl.connect()
            digest_id = info.digests[0].preamble.id
            cl.enable_digest(digest_id)
            with h1.enter():
                raw = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            raw.bind((a.ifname, 0))
            raw.send(bytes(6) + bytes.fromhex(a.mac.replace(":", "")) + b"\x88\xb6\x02\x03abc")
            raw.close()
            got = cl.digests.get(timeout=10)
            assert got.digest_id == digest_id
            values = [[int.from_bytes(m.bitstring, "big") for m in d.struct.members] for d in got.data]
            assert values == [[2, 3, 3]]            # kind, len, ingress port
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
    except queue.Empty:
        raise AssertionError("no digest arrived within 10 s") from None
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()
