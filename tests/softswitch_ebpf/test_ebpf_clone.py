"""Clones (I2E, E2E, preserved field lists, sessions of several ports, truncation) and
multicast on the eBPF target: the same STF on both targets, random packets giving
identical outputs, registers and counters, the INT program's report clone, and real
copies through veths (bpf_clone_redirect)."""
from __future__ import annotations

import random
import socket
import time
from typing import Any

import pytest
from ebpf_helpers import ROOT, start_switch_process

from softswitch.errors import RuntimeApiError
from softswitch.stf import StfRunner, parse_stf
from softswitch.targets.python.switch import Switch
from softswitch.v1model import Replica

pytestmark = [pytest.mark.bpf, pytest.mark.root]
HERE = ROOT / "tests" / "softswitch_ebpf"
PROGRAM = HERE / "clone.p4"


def _sessions(sw: Switch) -> None:
    rt = sw.runtime
    rt.clone_session_set(10, [Replica(port=5, rid=1)])
    rt.clone_session_set(11, [Replica(port=6, rid=2), Replica(port=7, rid=3)], truncate=20)
    rt.clone_session_set(12, [Replica(port=5, rid=9)])
    # E2E clones of session 13 push a header: a cut inside the pushed bytes is the
    # target's documented truncate limit (README), so the cut keeps them
    rt.clone_session_set(13, [Replica(port=8, rid=4), Replica(port=9, rid=5), Replica(port=3, rid=6)],
                         truncate=30)
    rt.multicast_group_create(1, [Replica(port=2, rid=0x11), Replica(port=3, rid=0x11)])
    rt.multicast_group_create(2, [Replica(port=p, rid=p) for p in (4, 5, 6, 7, 8, 9)])
    rt.multicast_group_create(3, [])                  # no replicas: dropped


@pytest.mark.parametrize("target", ["python", "ebpf"])
@pytest.mark.parametrize("name, checked", [("clone", 15), ("passes", 7)])
def test_stf_on_both_targets(target: str, name: str, checked: int) -> None:
    stf = HERE / f"{name}.stf"
    sw = Switch.from_file(HERE / f"{name}.p4", target=target)
    try:
        res = StfRunner(sw, strict=True).run(parse_stf(stf.read_text(), str(stf)), str(stf))
    finally:
        if target == "ebpf":
            sw.close()
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked == checked


def _packet(rng: random.Random) -> bytes:
    eth = bytes(6) + rng.randbytes(6)
    kind = rng.random()
    if kind < 0.1:
        return eth + rng.randbytes(2) + rng.randbytes(rng.randrange(0, 40))    # other protocols
    group = 0xA0 | rng.randrange(4) if rng.random() < 0.2 else rng.getrandbits(8)   # multicast
    tag = bytes([rng.getrandbits(8), group]) + rng.randbytes(2) + rng.randbytes(4)
    frame = eth + b"\x88\xb5" + tag + rng.randbytes(rng.randrange(0, 60))
    if kind < 0.2:
        frame = frame[:rng.randrange(14, 22)]                                # truncated tag
    return frame


def test_random_packets_give_identical_clones_registers_and_counters() -> None:
    rng = random.Random(1414)
    py = Switch.from_file(PROGRAM)
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        for sw in (py, kern):
            _sessions(sw)
        clones = replicas = 0
        for i in range(2000):
            frame, port = _packet(rng), rng.randrange(0, 16)
            if i == 1000:                           # sessions change under traffic
                for sw in (py, kern):
                    sw.runtime.clone_session_delete(12)
                    sw.runtime.clone_session_set(10, [Replica(port=6, rid=7)], truncate=15)
                    sw.runtime.multicast_group_modify(1, [Replica(port=9, rid=1)])
                    sw.runtime.multicast_group_delete(2)
            want, _ = py.v1.process_packet(port, frame)
            got, _ = kern.process_packet(port, frame)
            assert [(o.port, o.data.hex(), o.instance_type) for o in got] == \
                [(o.port, o.data.hex(), o.instance_type) for o in want], f"packet {i}: {frame.hex()}"
            clones += sum(1 for o in want if o.instance_type in (1, 2))
            replicas += sum(1 for o in want if o.instance_type == 5)
        assert clones > 500 and replicas > 200, (clones, replicas)
        assert kern.runtime.register("passes").cells == py.runtime.register("passes").cells
        c_py, c_k = py.runtime.counter("out_port"), kern.runtime.counter("out_port")
        assert (c_k.packets, c_k.bytes) == (c_py.packets, c_py.bytes)
        assert kern.kernel.stats()["clone_lost"] == 0


def test_random_resubmit_recirculate_and_clones_identical() -> None:
    """passes.p4: resubmits, recirculations (some looping until cut), I2E and E2E clones
    mixed at random; outputs in order and the per-instance-type pass counts agree."""
    rng = random.Random(64)
    program = HERE / "passes.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf") as kern:
        for sw in (py, kern):
            sw.runtime.clone_session_set(8, [Replica(port=3, rid=1), Replica(port=5, rid=2)])
            sw.runtime.clone_session_set(9, [Replica(port=4, rid=3)], truncate=16)
        for i in range(400):
            op = rng.choice([0, 1, 1, 2, 2, 3, 4, 5]) | (rng.getrandbits(3) << 4)
            frame = bytes(6) + rng.randbytes(6) + b"\x88\xb5" + bytes([op]) + rng.randbytes(5) \
                + rng.randbytes(rng.randrange(0, 30))
            if rng.random() < 0.05:
                frame = frame[:rng.randrange(14, 20)]
            want, _ = py.v1.process_packet(0, frame)
            got, _ = kern.process_packet(0, frame)
            assert [(o.port, o.data.hex(), o.instance_type) for o in got] == \
                [(o.port, o.data.hex(), o.instance_type) for o in want], f"packet {i}: {frame.hex()}"
        for reg in ("seen_in", "seen_eg"):
            assert kern.runtime.register(reg).cells == py.runtime.register(reg).cells, reg
        seen = py.runtime.register("seen_in").cells
        assert seen[4] > 100 and seen[6] > 1000, seen      # recirculated, resubmitted passes
        # a read of some cells (P4Runtime's read with an index) looks up only those
        obj = kern.runtime.register("seen_in")
        obj.cells[:] = [-1] * obj.size
        kern.runtime.register("seen_in", cells=[4, 6, obj.size])   # out of range: skipped
        assert (obj.cells[4], obj.cells[6]) == (seen[4], seen[6])
        assert obj.cells.count(-1) == obj.size - 2
        assert kern.runtime.register("seen_in").cells == seen   # all, batched


def test_int_report_stf_on_ebpf() -> None:
    """The INT program's Telemetry Report (an I2E clone to the collector's session)."""
    for name in ("int_report", "int_source", "link_seq"):
        stf = ROOT / "tests" / "p4_int" / f"{name}.stf"
        with Switch.from_file(ROOT / "p4" / "int_rocev2.p4", include_dirs=[str(ROOT / "p4")],
                              target="ebpf") as sw:
            res = StfRunner(sw).run(parse_stf(stf.read_text(), str(stf)), str(stf))
        assert res.ok, "\n".join(res.failures)


def test_sessions_the_target_cannot_hold_are_refused() -> None:
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        with pytest.raises(RuntimeApiError, match="at most 16 ports"):
            kern.runtime.clone_session_set(1, [Replica(port=p) for p in range(17)])
        with pytest.raises(RuntimeApiError, match="port 600"):
            kern.runtime.clone_session_set(1, [Replica(port=600)])
        with pytest.raises(RuntimeApiError, match="at most 16 ports"):
            kern.runtime.multicast_group_create(1, [Replica(port=p) for p in range(17)])
        assert kern.runtime.pre.sessions == {} and kern.runtime.pre.groups == {}
        node = kern.runtime.mc_node_create(1, list(range(10)))
        kern.runtime.mc_node_associate(2, node)
        big = kern.runtime.mc_node_create(2, list(range(10, 17)))
        with pytest.raises(RuntimeApiError, match="17 replicas"):
            kern.runtime.mc_node_associate(2, big)
        assert len(kern.runtime.pre.groups[2]) == 10
        kern.runtime.clone_session_set(1, [Replica(port=5)])
        kern.runtime.clone_session_delete(1)     # and the kernel's copy goes with it
        frame = bytes.fromhex("000000000002000000000001" "88b5" "04000000" "00001234")
        assert [p for p, _ in kern.process(1, frame)] == [1]


def _live(program: str, hosts: list[int], configure: Any, frames: list[bytes], sender: int = 1
          ) -> tuple[dict[int, list[bytes]], dict[str, int]]:
    """Attach `program` to switch ports `hosts` in a namespace, one host namespace per
    port; send `frames` from port `sender`'s host; what each other host received (raw
    frames of the kinds sent) and the program's statistics."""
    import ctypes

    from common.kernel.netns import Namespace, veth_pair
    from common.kernel.tc import attach_tc
    made: list[Namespace] = []
    atts = []
    path = ROOT / "p4" / "examples" / program
    kern = Switch.from_file(path if path.exists() else HERE / program, target="ebpf")
    try:
        sw = Namespace.create("tclo")
        made.append(sw)
        ends = {}
        for port in hosts:
            h = Namespace.create("tclo")
            made.append(h)
            s_end, h_end = veth_pair(sw, h, prefix="tclo")
            ends[port] = (h, h_end)
            att = attach_tc(kern.kernel.fd, "p4_tclone", s_end.ifname, netns=sw.name)
            atts.append(att)
            kern.kernel.table("p4_port_of_ifindex")[ctypes.c_uint32(att.ifindex)] = ctypes.c_uint32(port)
            kern.kernel.table("p4_ifindex_of_port")[ctypes.c_int(port)] = ctypes.c_uint32(att.ifindex)
        kern.kernel.set_test_port(None)
        configure(kern.runtime)
        socks = {}
        for port, (h, end) in ends.items():
            if port == sender:
                continue
            with h.enter():
                sk = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0003))
            sk.bind((end.ifname, 0))
            sk.settimeout(0.5)
            socks[port] = sk
        h1, a = ends[sender]
        with h1.enter():
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((a.ifname, 0))
        for i, frame in enumerate(frames):
            tx.send(frame)
            if i % 20 == 19:
                time.sleep(0.01)
        tx.close()
        got: dict[int, list[bytes]] = {p: [] for p in socks}
        etypes = {f[12:14] for f in frames}        # not the hosts' own IPv6 chatter
        for port, sk in socks.items():
            while True:
                try:
                    got_frame = sk.recv(2048)
                except TimeoutError:
                    break
                if got_frame[12:14] in etypes:
                    got[port].append(got_frame)
            sk.close()
        return got, kern.kernel.stats()
    finally:
        for att in atts:
            att.detach()
        kern.close()
        for ns in reversed(made):
            ns.close()


def _ipv4_frames(dst: str, n: int) -> list[bytes]:
    return [bytes.fromhex(dst + "000000000001" "0800") + bytes([0x45, 0]) + i.to_bytes(2, "big") + bytes(60)
            for i in range(n)]


def test_clones_leave_through_veths() -> None:
    """Live mode: bpf_clone_redirect copies the frame into the program again, which
    sends the I2E clone (tagged in egress, cut to the session's length) to the
    session's port while the original goes on; nothing is lost."""
    from softswitch.tables import Exact, Ternary

    def configure(rt: Any) -> None:
        rt.table_add("MyIngress.l2", [Exact(0x000000000002)], "MyIngress.forward", [2])
        rt.table_add("MyIngress.mirror_acl", [Ternary(0x0800, 0xFFFF)], "MyIngress.mirror", [100],
                     priority=10)
        rt.clone_session_set(100, [Replica(port=5)], truncate=40)
    sent = _ipv4_frames("000000000002", 200)
    got, st = _live("mirror.p4", [1, 2, 5], configure, sent)
    assert got[2] == sent
    assert got[5] == [f[:6] + bytes.fromhex("c10e00000000") + f[12:40] for f in sent]
    assert st["clone"] == len(sent) and st["clone_lost"] == 0 and st["rx"] >= len(sent), st


def test_multicast_replicas_leave_through_veths() -> None:
    """Live mode multicast: each replica of the group leaves its port with its rid; the
    one back to the ingress port is pruned by egress."""
    def configure(rt: Any) -> None:
        rt.multicast_group_create(1, [Replica(port=p, rid=0x10 + p) for p in (1, 2, 3, 4)])
    sent = _ipv4_frames("ffffffffffff", 100)
    got, st = _live("multicast.p4", [1, 2, 3, 4], configure, sent)
    for port in (2, 3, 4):
        assert got[port] == [f[:11] + bytes([0x10 + port]) + f[12:] for f in sent], port
    assert st["clone"] >= 4 * len(sent) and st["clone_lost"] == 0, st   # + stray IPv6 floods


def test_resubmit_and_recirculation_through_veths() -> None:
    """Live mode: a recirculated packet (the deparsed frame, copied into ingress) comes
    round three times and leaves with its rounds counted; a resubmitted one comes back
    with its preserved field; a recirculation loop is cut and counted."""
    def frame(op: int, i: int) -> bytes:
        return bytes.fromhex("000000000001" "000000000002" "88b5") + bytes([op, 0, 0, 0, 0, 0]) \
            + i.to_bytes(2, "big") + bytes(40)
    sent = [frame(2, i) for i in range(50)] + [frame(1, i) for i in range(50)] + [frame(5, 0)]
    got, st = _live("passes.p4", [0, 1], lambda rt: None, sent, sender=0)
    want = [f[:14] + bytes([2, 3, 4, 0, 2, 0]) + f[20:] for f in sent[:50]] \
        + [f[:14] + bytes([1, 0, 6, 0, 0x11, 0]) + f[20:] for f in sent[50:100]]
    assert got[1] == want
    assert st["clone_lost"] == 0 and st["dropped"] >= 1, st


def test_controller_programs_the_int_switch_and_reports_leave(tmp_path) -> None:
    """The controller brings up a kernel switch over P4Runtime as it does in the test
    bed: it pushes the INT program and the entries (and the collector's clone session)
    its intent computes for leaf s4 of leaf-spine; a RoCEv2 frame from h3 to h4 then
    gets INT inserted and stripped in the kernel, and h4, the collector, receives the
    frame and its Telemetry Report (the live I2E clone)."""

    from common.kernel.netns import Namespace, veth_pair
    from controller.intent import CollectorSpec, IntentOptions, SinkMode, compute_intent
    from controller.p4rt import Fleet, ManagedSwitch, load_pipeline
    from controller.topology import load_topology
    from tests.helpers.p4int import roce_frame
    topo = load_topology(ROOT / "mininet_topos" / "topofiles" / "leaf_spine.yaml")
    desired = compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT,
                                                 collector=CollectorSpec(host="h4")))["s4"]
    pipeline = load_pipeline(target="softswitch", program=ROOT / "p4" / "int_rocev2.p4")
    made: list[Namespace] = []
    proc = None
    try:
        sw, h3, h4 = (Namespace.create("tcin") for _ in range(3))
        made += [sw, h3, h4]
        s1, a = veth_pair(sw, h3, prefix="tcin")
        s2, b = veth_pair(sw, h4, prefix="tcin")
        sock = tmp_path / "p4rt.sock"
        proc = start_switch_process(sw, ["--target", "ebpf", "-i", f"1@{s1.ifname}",
                                         "-i", f"2@{s2.ifname}", "--device-id", "4",
                                         "--grpc-server-addr", f"unix:{sock}"], sock)
        managed = ManagedSwitch(name="s4", address=f"unix:{sock}", device_id=4, pipeline=pipeline,
                                desired=desired)
        with Fleet([managed]) as fleet:
            result = fleet.bring_up()
            assert result.ok, {k: str(v) for k, v in result.failures.items()}
            with h4.enter():
                rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
            rx.bind((b.ifname, 0))
            rx.settimeout(1.0)
            with h3.enter():
                tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
            tx.bind((a.ifname, 0))
            frame = roce_frame(src="10.0.2.1", dst="10.0.2.2", eth_src=topo.host("h3").mac,
                               eth_dst="02:00:00:00:00:04", payload=bytes(range(64)))
            got: list[bytes] = []
            for _ in range(3):
                tx.send(frame)
            while True:
                try:
                    got.append(rx.recv(4096))
                except TimeoutError:
                    break
            tx.close()
            rx.close()
        udp_dports = [int.from_bytes(f[36:38], "big") for f in got if f[23] == 17]
        assert udp_dports.count(4791) == 3, got        # the frames, INT stripped
        assert udp_dports.count(32766) == 3, got       # and their reports
        roce = [f for f in got if int.from_bytes(f[36:38], "big") == 4791]
        assert all(len(f) == len(frame) for f in roce)
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()
