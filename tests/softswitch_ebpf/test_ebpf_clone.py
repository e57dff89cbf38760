"""Clones (I2E, E2E, preserved field lists, sessions of several ports, truncation) on
the eBPF target: the same STF on both targets, random packets giving identical
outputs, registers and counters, the INT program's report clone, and real copies
through veths (bpf_clone_redirect)."""
from __future__ import annotations

import random
import socket
import time

import pytest
from ebpf_helpers import ROOT

from softswitch.api import Switch
from softswitch.errors import RuntimeApiError
from softswitch.stf import StfRunner, parse_stf
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


@pytest.mark.parametrize("target", ["python", "ebpf"])
def test_clone_stf_on_both_targets(target: str) -> None:
    stf = HERE / "clone.stf"
    sw = Switch.from_file(PROGRAM, target=target)
    try:
        res = StfRunner(sw, strict=True).run(parse_stf(stf.read_text(), str(stf)), str(stf))
    finally:
        if target == "ebpf":
            sw.close()
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked == 11


def _packet(rng: random.Random) -> bytes:
    eth = bytes(6) + rng.randbytes(6)
    kind = rng.random()
    if kind < 0.1:
        return eth + rng.randbytes(2) + rng.randbytes(rng.randrange(0, 40))    # other protocols
    tag = bytes([rng.getrandbits(8)]) + rng.randbytes(3) + rng.randbytes(4)
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
        clones = 0
        for i in range(2000):
            frame, port = _packet(rng), rng.randrange(0, 16)
            if i == 1000:                           # sessions change under traffic
                for sw in (py, kern):
                    sw.runtime.clone_session_delete(12)
                    sw.runtime.clone_session_set(10, [Replica(port=6, rid=7)], truncate=15)
            want, _ = py.v1.process_packet(port, frame)
            got, _ = kern.process_packet(port, frame)
            assert [(o.port, o.data.hex(), o.instance_type) for o in got] == \
                [(o.port, o.data.hex(), o.instance_type) for o in want], f"packet {i}: {frame.hex()}"
            clones += sum(1 for o in want if o.instance_type)
        assert clones > 500
        assert kern.runtime.register("passes").cells == py.runtime.register("passes").cells
        c_py, c_k = py.runtime.counter("out_port"), kern.runtime.counter("out_port")
        assert (c_k.packets, c_k.bytes) == (c_py.packets, c_py.bytes)
        assert kern.kernel.stats()["clone_lost"] == 0


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
        with pytest.raises(RuntimeApiError, match="multicast groups are not supported"):
            kern.runtime.multicast_group_create(1, [Replica(port=1)])
        assert kern.runtime.pre.sessions == {} and kern.runtime.pre.groups == {}
        kern.runtime.clone_session_set(1, [Replica(port=5)])
        kern.runtime.clone_session_delete(1)     # and the kernel's copy goes with it
        frame = bytes.fromhex("000000000002000000000001" "88b5" "04000000" "00001234")
        assert [p for p, _ in kern.process(1, frame)] == [1]


def test_clones_leave_through_veths(tmp_path) -> None:
    """Live mode: bpf_clone_redirect copies the frame into the program again, which
    sends the I2E clone (tagged in egress) to the session's port while the original
    goes on; nothing is lost."""
    import ctypes

    from ebpf.tc import attach_tc
    from mininet_topos.netns import Namespace, veth_pair
    made: list[Namespace] = []
    atts = []
    kern = Switch.from_file(ROOT / "p4" / "examples" / "mirror.p4", target="ebpf")
    try:
        h1, sw, h2, h5 = (Namespace.create("tclo") for _ in range(4))
        made += [h1, sw, h2, h5]
        a, s1 = veth_pair(h1, sw, prefix="tclo")
        s2, b = veth_pair(sw, h2, prefix="tclo")
        s5, c = veth_pair(sw, h5, prefix="tclo")
        kern.kernel.set_test_port(None)
        for port, end in ((1, s1), (2, s2), (5, s5)):
            att = attach_tc(kern.kernel.fd, "p4_tclone", end.ifname, netns=sw.name)
            atts.append(att)
            kern.kernel.table("p4_port_of_ifindex")[ctypes.c_uint32(att.ifindex)] = ctypes.c_uint32(port)
            kern.kernel.table("p4_ifindex_of_port")[ctypes.c_int(port)] = ctypes.c_uint32(att.ifindex)
        rt = kern.runtime
        from softswitch.tables import Exact, Ternary
        rt.table_add("MyIngress.l2", [Exact(0x000000000002)], "MyIngress.forward", [2])
        rt.table_add("MyIngress.mirror_acl", [Ternary(0x0800, 0xFFFF)], "MyIngress.mirror", [100],
                     priority=10)
        rt.clone_session_set(100, [Replica(port=5)], truncate=40)
        socks = {}
        for name, ns, end in (("h2", h2, b), ("h5", h5, c)):
            with ns.enter():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x0800))
            s.bind((end.ifname, 0))
            s.settimeout(0.5)
            socks[name] = s
        with h1.enter():
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((a.ifname, 0))
        n = 200
        sent = []
        for i in range(n):
            frame = (bytes.fromhex("000000000002" "000000000001" "0800")
                     + bytes([0x45, 0]) + i.to_bytes(2, "big") + bytes(60))
            tx.send(frame)
            sent.append(frame)
            if i % 20 == 19:
                time.sleep(0.01)
        got: dict[str, list[bytes]] = {"h2": [], "h5": []}
        for name, s in socks.items():
            while True:
                try:
                    got[name].append(s.recv(2048))
                except TimeoutError:
                    break
            s.close()
        tx.close()
        assert got["h2"] == sent
        assert got["h5"] == [f[:6] + bytes.fromhex("c10e00000000") + f[12:40] for f in sent]
        st = kern.kernel.stats()
        assert st["clone"] == n and st["clone_lost"] == 0 and st["rx"] >= n, st   # + stray IPv6
    finally:
        for att in atts:
            att.detach()
        kern.close()
        for ns in reversed(made):
            ns.close()
