"""Queue bytes of p4/int_rocev2.p4 on the eBPF target (p4/README.md, "Queue bytes").

The eBPF target runs egress when a packet is queued (its virtual queue,
softswitch/backends/ebpf/queues.py), so the program's ``queue_bytes`` register never
sees the bytes behind a packet; the hop record and ECN marking take the bytes queued
ahead of it instead: ``deq_timedelta`` (the wait) x the port's line rate. The port
here runs at 8 Mbit/s, one byte a microsecond, on the program's injected clock, so
the bytes ahead are the lengths of the frames the port sends before this one, minus
the microseconds they have already been on the wire. Mixed sizes are the point: two
small ACKs waiting ahead of a 2 KiB frame are ~300 bytes, not 2 x 2 KiB (what the
depth x this packet's length, the program's former stand-in, reported; the demo's
4 KiB frames reported 8.4 KB for two 139-byte ACKs).
"""
from __future__ import annotations

import pytest
from ebpf_helpers import ROOT

from tests.helpers.p4int import H2_MAC, IntSwitch, decode_hop_words, roce_frame, split_int

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "int_rocev2.p4"
T0 = 10**12                 # ns, the injected clock's origin
RATE_MBPS = 8               # one byte per microsecond
ACK = bytes(40)             # payload of a small frame (an ACK's size on the wire: ~150 bytes)
DATA = bytes(2048)          # a data frame (BPF_PROG_TEST_RUN takes frames of up to ~3.5 KB)
ECT0 = 2


@pytest.fixture
def sw():
    from softswitch.targets.python.switch import Switch
    s = Switch.from_file(PROGRAM, target="ebpf", include_dirs=[str(ROOT / "p4")])
    try:
        isw = IntSwitch(node_id=1, switch=s, runtime=s.runtime, clock=[0])
        s.runtime.table_set_default("SwitchEgress.switch_config", "set_switch_config", [1])
        isw.route("10.0.2.0", 24, 2, H2_MAC)
        isw.mtu(2, 4500)
        isw.line_rate(2, RATE_MBPS)
        isw.watch()
        isw.sink(2, "host")
        s.set_queue(2, rate_bps=RATE_MBPS * 1e6, depth_pkts=64)
        yield isw
    finally:
        s.close()


def _send(isw: IntSwitch, t_us: int, payload: bytes, psn: int, tos: int = 0) -> tuple[int, dict]:
    """One frame at ``t_us``: (its length as sent, its hop record and ECN bits)."""
    isw.switch.kernel.set_test_clock(T0 + t_us * 1000)
    (port, out), = isw.process(1, roce_frame(psn=psn, payload=payload, tos=tos))
    assert port == 2
    d = split_int(out)
    (hop,) = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    hop["ecn"] = d["ecn"]
    return len(out), hop


def test_small_frames_ahead_of_a_big_one_count_their_bytes(sw) -> None:
    on_wire, h0 = _send(sw, 0, ACK, 1)          # leaves at once
    ack1, h1 = _send(sw, 0, ACK, 2)             # waits behind the one on the wire only
    ack2, h2 = _send(sw, 0, ACK, 3)
    assert (h0["queue_bytes"], h0["queue_occupancy"]) == (0, 0)
    assert (h1["queue_bytes"], h1["queue_occupancy"]) == (0, 0)   # a frame being sent is no queue
    assert h2["queue_occupancy"] == 1 and h2["queue_bytes"] == on_wire + ack1
    big, h3 = _send(sw, 0, DATA, 4)             # two ACKs waiting, one on the wire
    assert h3["queue_occupancy"] == 2
    assert h3["queue_bytes"] == on_wire + ack1 + ack2
    assert h3["queue_bytes"] < 600 < 2 * big    # not depth x this packet's length
    # 100 us later the port has sent 100 more bytes of what was ahead
    _, h4 = _send(sw, 100, DATA, 5)
    assert h4["queue_occupancy"] == 3
    assert h4["queue_bytes"] == on_wire + ack1 + ack2 + big - 100
    # and once everything has left, no queue
    _, h5 = _send(sw, 100_000, ACK, 6)
    assert (h5["queue_bytes"], h5["queue_occupancy"]) == (0, 0)
    assert sw.reg("queue_bytes", 2) == 0        # the register: nothing counted (no drops)


def test_big_frames_ahead_count_their_bytes(sw) -> None:
    lens = [_send(sw, 0, DATA, i)[0] for i in range(3)]
    _, hop = _send(sw, 0, ACK, 3)
    assert hop["queue_occupancy"] == 2 and hop["queue_bytes"] == sum(lens)


def test_ecn_marks_on_the_bytes_ahead(sw) -> None:
    """DCQCN's marking input: two ACKs waiting (below Kmin) leave a data frame unmarked,
    where depth x its length (2 x 2 KiB, above Kmax) marked it; two data frames waiting
    (above Kmax) mark the next one, whatever its size."""
    sw.ecn(2, 1000, 4000, 65535)
    for i in range(3):
        _send(sw, 0, ACK, i, tos=ECT0)
    _, hop = _send(sw, 0, DATA, 3, tos=ECT0)
    assert hop["queue_occupancy"] == 2 and hop["queue_bytes"] < 1000
    assert hop["ecn"] == ECT0                   # not marked
    assert sw.runtime.counter_read("SwitchEgress.ecn_marked", 2)[0] == 0
    _send(sw, 0, DATA, 4)                       # not ECN-capable: never marked (its 2.6 KB
                                                # ahead would mark it with some probability)
    _, hop = _send(sw, 0, ACK, 5, tos=ECT0)
    assert hop["queue_bytes"] > 4000
    assert hop["ecn"] == 3                      # CE
    assert sw.runtime.counter_read("SwitchEgress.ecn_marked", 2)[0] == 1
