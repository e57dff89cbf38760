"""The eBPF target's traffic manager: the program's virtual queue per egress port.

Unit level: BPF_PROG_TEST_RUN with the program's clock injected (`set_test_clock`), so
the queue's growth, its tail drops at the depth and its drain follow from the rate
alone. Then real veths: a burst above the port's rate through the switch process, read
by a program that writes enq_qdepth into each frame, grows a queue the kernel really
shapes, and the frames beyond the depth are dropped and counted.
"""
from __future__ import annotations

import socket
import struct

import pytest
from ebpf_helpers import ROOT, start_switch_process

from softswitch.switchd.errors import OptionError
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROBE = ROOT / "tests" / "softswitch_ebpf" / "queue_probe.p4"
LEN = 1000                          # bytes: 1 ms at 8 Mbit/s
FRAME = bytes(12) + b"\x88\xb7" + bytes(LEN - 14)
T0 = 10**12                         # ns, the injected clock's origin


_SO_TIMESTAMPNS = 35  # linux/asm-generic/socket.h (the socket module does not name it)


def _arrival_s(ancillary: list[tuple[int, int, bytes]]) -> float:
    """The receive timestamp the kernel attached to a frame (``SO_TIMESTAMPNS``)."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == _SO_TIMESTAMPNS:
            sec, nsec = struct.unpack("qq", data[:16])
            return sec + nsec * 1e-9
    raise AssertionError("a frame without its kernel receive timestamp")


def _q(data: bytes) -> dict[str, int]:
    enq, deq, delta, enq_ts, egress_ts, port = struct.unpack("!IIII6sH", data[14:38])
    return {"enq_qdepth": enq, "deq_qdepth": deq, "deq_timedelta": delta, "enq_timestamp": enq_ts,
            "egress_ts": int.from_bytes(egress_ts, "big"), "port": port}


@pytest.fixture
def sw():
    s = Switch.from_file(PROBE, target="ebpf")
    try:
        yield s
    finally:
        s.close()


def _at(sw, t_ns: int, port: int = 0) -> dict[str, int] | None:
    sw.kernel.set_test_clock(T0 + t_ns)
    out = sw.process(port, FRAME)
    return _q(out[0][1]) if out else None


def test_unpaced_port_has_no_queue(sw) -> None:
    seen = [_at(sw, 0) for _ in range(5)]
    assert all(q is not None and q["enq_qdepth"] == 0 and q["deq_timedelta"] == 0 for q in seen)
    assert seen[0]["egress_ts"] == seen[0]["enq_timestamp"] == (T0 // 1000) & 0xFFFFFFFF


def test_queue_grows_drops_at_depth_and_drains(sw) -> None:
    sw.set_queue(1, rate_bps=8e6, depth_pkts=3)
    # a burst at one instant: the first leaves at once, three wait, the rest are dropped
    burst = [_at(sw, 0) for _ in range(6)]
    kept = [q for q in burst if q is not None]
    assert [q["enq_qdepth"] for q in kept] == [0, 0, 1, 2]
    assert [q["deq_timedelta"] for q in kept] == [0, 1000, 2000, 3000]     # µs behind the ones ahead
    assert [q["egress_ts"] - q["enq_timestamp"] for q in kept] == [0, 1000, 2000, 3000]
    assert burst[4:] == [None, None]
    stats = sw.queue_stats([1])[1]
    assert stats["tail_drops"] == 2 and stats["queue_high_water"] == 3
    assert sw.kernel.stats()["tail_drop"] == 2
    # 1.5 ms later one and a half frames have left: two wait behind the one being sent
    q = _at(sw, 1_500_000)
    assert q is not None and q["enq_qdepth"] == 2 and q["deq_timedelta"] == 2500
    # once everything has left, the queue is empty again
    q = _at(sw, 20_000_000)
    assert q is not None and q["enq_qdepth"] == 0 and q["deq_timedelta"] == 0
    # the other port's queue is independent (unpaced)
    q = _at(sw, 20_000_000, port=1)
    assert q is not None and q["port"] == 2 and q["enq_qdepth"] == 0


def test_queue_is_charged_what_the_port_sends(sw) -> None:
    """Egress adds a 24-byte header to 0x88b9 frames: the port sends 1024 bytes a frame,
    so the next one waits 1024 us at 8 Mbit/s, not the 1000 us of the length queued
    (the kernel's shaper sends the longer frame, and must not fall behind the model)."""
    grow = bytes(12) + b"\x88\xb9" + bytes(LEN - 14)
    sw.set_queue(1, rate_bps=8e6, depth_pkts=10)
    sw.kernel.set_test_clock(T0)
    outs = [sw.process(0, grow) for _ in range(3)]
    assert [len(o[0][1]) for o in outs] == [LEN + 24] * 3
    assert [_q(o[0][1])["deq_timedelta"] for o in outs] == [0, 1024, 2048]
    # a frame that leaves as queued is charged its own length
    q = _at(sw, 0)
    assert q is not None and q["deq_timedelta"] == 3072


def test_runtime_changes_rate_and_depth(sw) -> None:
    sw.set_queue(1, rate_bps=8e6, depth_pkts=1)
    assert [_at(sw, 0) is not None for _ in range(3)] == [True, True, False]
    sw.set_queue(1, depth_pkts=10, rate_bps=16e6)   # twice as fast: 0.5 ms per frame
    q = _at(sw, 0)
    assert q is not None and q["enq_qdepth"] == 1 and q["deq_timedelta"] == 2000
    q = _at(sw, 0)
    assert q is not None and q["deq_timedelta"] == 2500
    with pytest.raises(OptionError, match="queue depth of port 1"):
        sw.set_queue(1, depth_pkts=0)
    with pytest.raises(OptionError, match="queue rate of port 1"):
        sw.set_queue(1, rate_bps=-1)


def test_burst_through_veths_fills_the_queue_and_drops_at_depth(tmp_path) -> None:
    """h1 -> port 2 -> (queue of port 1: 8 Mbit/s, 16 frames) -> h2: a burst of 150
    frames far above the rate; h2 reads a growing enq_qdepth, the frames beyond the
    depth are tail drops counted by the switch, the kernel drops nothing the queue
    admitted, and the frames really leave at the rate (shaped)."""
    import json
    import time

    from common.kernel.netns import Namespace, veth_pair
    made: list[Namespace] = []
    proc = None
    burst, depth = 150, 16
    try:
        h1, sw, h2 = (Namespace.create("tebtm") for _ in range(3))
        made += [h1, sw, h2]
        for ns in made:        # no IPv6 router solicitations among the measured frames
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        a, s2 = veth_pair(h1, sw, prefix="tebtm")
        s1, b = veth_pair(sw, h2, prefix="tebtm")
        stats = tmp_path / "stats.json"
        proc = start_switch_process(sw, [str(PROBE), "--target", "ebpf",
                                         "-i", f"1@{s1.ifname}", "-i", f"2@{s2.ifname}",
                                         "--queue-rate", "1:8", "--queue-depth", f"1:{depth}",
                                         "--grpc-server-addr", "none",
                                         "--stats-file", str(stats)], stats)
        qdiscs = sw.run(["tc", "qdisc", "show", "dev", s1.ifname]).stdout
        assert "htb" in qdiscs and f"limit {depth * 4}" in qdiscs, qdiscs
        with h2.enter():
            rx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88B7))
        rx.bind((b.ifname, 0))
        rx.settimeout(1.0)
        # the kernel's arrival time of each frame, not when this process got to read it:
        # read late on a loaded host, 17 frames shaped over 16 ms were read within 11
        rx.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
        with h1.enter():
            tx = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
        tx.bind((a.ifname, 0))
        try:
            for i in range(burst):
                tx.send(FRAME[:14] + bytes(22) + i.to_bytes(2, "big") + FRAME[38:])
            got: list[tuple[float, dict[str, int]]] = []
            while True:
                try:
                    data, anc, _flags, _addr = rx.recvmsg(4096, 64)
                except TimeoutError:
                    break
                got.append((_arrival_s(anc), _q(data)))
        finally:
            rx.close()
            tx.close()
        depths = [q["enq_qdepth"] for _, q in got]
        assert depths[0] == 0 and max(depths) == depth - 1, depths     # grew to the depth
        assert all(q["deq_timedelta"] >= 900 * q["enq_qdepth"] for _, q in got[1:]), got[:5]
        # the kernel really sends at the rate: n frames take at least (n - 1) ms but for
        # the frames HTB's 4 KB bucket lets out at line rate (common/kernel/shaping.py;
        # wide margin): 17 frames took 10.9-11.1 ms in runs that failed the bound
        # without the bucket, 0.7 x 16 ms (unshaped they take well under a millisecond)
        free = 4096 // LEN
        assert got[-1][0] - got[0][0] >= 0.7 * (len(got) - 1 - free) / 1000, got[:5]
        deadline = time.monotonic() + 10
        while True:
            st = json.loads(stats.read_text())
            if st.get("rx", 0) >= burst or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        q1 = st["queues"]["1"]
        assert st["rx"] == burst and st["tail_drop"] == q1["tail_drops"] > 0, st
        assert len(got) == burst - q1["tail_drops"], (len(got), st)   # the kernel lost none
        assert q1["queue_high_water"] == depth and q1["queue_rate_bps"] == 8e6, q1
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        left = sw.run(["tc", "qdisc", "show", "dev", s1.ifname]).stdout
        assert "htb" not in left, left
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in reversed(made):
            ns.close()


def test_shaping_reaches_a_namespace_given_by_name_or_by_path() -> None:
    """`--netns` may be a name (``tc -n``) or a path such as /proc/PID/ns/net, which
    ``tc -n`` refuses: both shape the port inside the namespace and unshape it again."""
    import subprocess

    from common.kernel.netns import unique_name
    from softswitch.targets.ebpf.shaping import shaping_argv, unshaping_argv

    ns = unique_name("qsh")
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "qd0", "type", "veth",
                        "peer", "name", "qd1"], check=True)
        for where in (ns, f"/run/netns/{ns}"):
            for argv in shaping_argv("qd0", 8e6, 16, where):
                subprocess.run(argv, check=True, capture_output=True)
            shown = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", "qd0"],
                                   capture_output=True, text=True, check=True).stdout
            assert "htb" in shown, (where, shown)
            subprocess.run(unshaping_argv("qd0", where), check=True, capture_output=True)
            shown = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", "qd0"],
                                   capture_output=True, text=True, check=True).stdout
            assert "htb" not in shown, (where, shown)
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
