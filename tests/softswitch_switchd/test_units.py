"""Pure pieces of the switch process: checksum completion, traffic manager, options,
pcap files, statistics. No sockets, no root."""
from __future__ import annotations

import argparse
import itertools
import threading
import time

import pytest
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether

from softswitch.switchd import (
    OptionError,
    PcapWriter,
    SwitchOptions,
    TrafficManager,
    finish_checksum,
    format_stats,
    read_pcap,
)
from softswitch.switchd.options import (
    ALL_PORTS,
    check_options,
    parse_depth,
    parse_interface,
    parse_rate,
)
from softswitch.v1model.jobs import QueueInfo


@pytest.mark.parametrize("payload_len", [0, 1, 17, 1000, 1473])
def test_finish_checksum_matches_scapy(payload_len: int) -> None:
    pkt = Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=1234, dport=5678) / (b"\xab" * payload_len)
    good = bytes(pkt)
    want = good[40:42]
    # what a veth delivers with tx checksum offload: only the folded pseudo-header sum
    ip = pkt[IP]
    pseudo = (int.from_bytes(bytes(map(int, ip.src.split("."))), "big") >> 16) + \
        (int.from_bytes(bytes(map(int, ip.src.split("."))), "big") & 0xFFFF) + \
        (int.from_bytes(bytes(map(int, ip.dst.split("."))), "big") >> 16) + \
        (int.from_bytes(bytes(map(int, ip.dst.split("."))), "big") & 0xFFFF) + 17 + len(pkt[UDP])
    while pseudo > 0xFFFF:
        pseudo = (pseudo & 0xFFFF) + (pseudo >> 16)
    frame = bytearray(good)
    frame[40:42] = pseudo.to_bytes(2, "big")
    assert finish_checksum(frame, 34, 6)
    assert bytes(frame[40:42]) == want


def test_finish_checksum_refuses_offsets_outside_the_frame() -> None:
    frame = bytearray(20)
    assert not finish_checksum(frame, 30, 6)
    assert not finish_checksum(frame, 10, 9)
    assert frame == bytearray(20)


def _tm(depart) -> TrafficManager:
    t0 = time.monotonic_ns()
    return TrafficManager(depart, clock_us=lambda: (time.monotonic_ns() - t0) // 1000)


def _recording_tm(n: int) -> tuple[TrafficManager, list[tuple[object, QueueInfo]],
                                   threading.Event]:
    """A TM whose departures are recorded, and an event set at the ``n``-th."""
    got: list[tuple[object, QueueInfo]] = []
    done = threading.Event()

    def depart(item: object, info: QueueInfo) -> None:
        got.append((item, info))
        if len(got) == n:
            done.set()

    return _tm(depart), got, done


def test_tm_depths_tail_drops_and_pacing() -> None:
    tm, got, done = _recording_tm(8)
    tm.set_rate(2, 1e6)          # 1000-byte packets: 8 ms each
    tm.set_depth(2, 8)
    accepted = [tm.enqueue(2, i, 1000) for i in range(12)]   # before the scheduler runs
    assert accepted == [True] * 8 + [False] * 4
    tm.start()
    try:
        assert done.wait(5)
    finally:
        tm.stop()
    q = tm.queues[2]
    assert (q.tail_drops, q.high_water, q.enqueued, q.dequeued) == (4, 8, 8, 8)
    assert [i for i, _ in got] == list(range(8))
    assert [info.enq_qdepth for _, info in got] == list(range(8))
    assert [info.deq_qdepth for _, info in got] == list(range(7, -1, -1))
    waits = [info.deq_timedelta_us for _, info in got]
    assert waits == sorted(waits) and waits[-1] >= 7 * 8000 * 0.9   # paced: the last waited 7 slots


def test_tm_reports_the_scheduled_departure_not_the_late_wake_up() -> None:
    """A paced port's packets leave on its schedule: departure times one serialisation
    apart even when the scheduler runs late (here: started 50 ms after the enqueues,
    so it catches up back to back), and the wait is measured to that departure."""
    got: list[QueueInfo] = []
    done = threading.Event()

    def depart(item: object, info: QueueInfo) -> None:
        got.append(info)
        if len(got) == 5:
            done.set()

    tm = _tm(depart)
    tm.set_rate(2, 1e6)          # 1000-byte packets: 8 ms each
    for i in range(5):
        assert tm.enqueue(2, i, 1000)
    time.sleep(0.05)             # the first four are late when the scheduler starts
    tm.start()
    try:
        assert done.wait(5)
    finally:
        tm.stop()
    deps = [info.departure_us for info in got]
    enqs = [info.enq_timestamp_us for info in got]
    assert all(d is not None for d in deps) and all(e is not None for e in enqs)
    gaps = [b - a for a, b in itertools.pairwise(int(d or 0) for d in deps)]
    assert all(abs(g - 8000) <= 2 for g in gaps), gaps
    assert all(info.deq_timedelta_us == int(d or 0) - int(e or 0)
               for info, d, e in zip(got, deps, enqs, strict=True))
    assert got[0].deq_timedelta_us < 1000   # the first was due at once, however late it ran


def test_tm_pause_queues_until_resume_and_counts_the_pause_as_waiting() -> None:
    """A paused port sends nothing and keeps queueing (tail drops at its depth); after
    `resume` its head leaves at once and the rest at the rate, the waits counting the
    pause; neither a paced nor an unpaced port may bypass its queue while paused."""
    tm, got, done = _recording_tm(4)
    tm.set_rate(2, 1e6)          # 1000-byte packets: 8 ms each
    tm.set_depth(2, 4)
    tm.pause(2)
    tm.pause(1)
    assert not tm.claim_bypass(1)
    tm.start()
    try:
        assert [tm.enqueue(2, i, 1000) for i in range(5)] == [True] * 4 + [False]
        time.sleep(0.05)
        assert got == [] and tm.queue_stats()[2]["queue_depth"] == 4
        tm.resume(2)
        assert done.wait(5)
    finally:
        tm.stop()
    assert [i for i, _ in got] == [0, 1, 2, 3]
    assert [info.deq_qdepth for _, info in got] == [3, 2, 1, 0]
    waits = [info.deq_timedelta_us for _, info in got]
    assert waits[0] >= 50_000 * 0.9                  # the pause counts as waiting
    deps = [int(info.departure_us or 0) for _, info in got]
    assert all(abs(b - a - 8000) <= 2 for a, b in itertools.pairwise(deps)), deps
    assert tm.queues[2].tail_drops == 1


def test_tm_unpaced_queue_and_clear() -> None:
    tm = _tm(lambda item, info: None)
    assert tm.enqueue(1, "a", 100)
    assert tm.clear() == 1
    with pytest.raises(OptionError, match="queue depth of port 3: 0 packets"):
        tm.set_depth(3, 0)
    with pytest.raises(OptionError, match="queue rate of port 3: -1"):
        tm.set_rate(3, -1)


def test_option_parsers_name_the_bad_value() -> None:
    assert parse_interface("1@veth1") == (1, "veth1")
    assert parse_rate("2:10") == (2, 10e6)
    assert parse_rate("5") == (ALL_PORTS, 5e6)
    assert parse_depth("3:128") == (3, 128)
    with pytest.raises(OptionError, match=r"-i 'veth1': expected PORT@INTERFACE"):
        parse_interface("veth1")
    with pytest.raises(OptionError, match="port 600 outside 0..510"):
        parse_interface("600@veth1")
    with pytest.raises(OptionError, match="'x' is not a number of Mbit/s"):
        parse_rate("1:x")
    with pytest.raises(OptionError, match="2.5 packets must be a whole number"):
        parse_depth("1:2.5")
    with pytest.raises(OptionError, match="--cpu-port 1 is also interface veth1"):
        check_options(SwitchOptions(interfaces={1: "veth1"}, cpu_port=1))
    with pytest.raises(OptionError, match="interface veth1 given for two ports"):
        check_options(SwitchOptions(interfaces={1: "veth1", 2: "veth1"}))


def test_cli_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    from softswitch.__main__ import main
    with pytest.raises(SystemExit):
        main(["switch", "--queue-rate", "1:-3"])
    assert "--queue-rate '1:-3': -3.0 Mbit/s outside 0..1000000" in capsys.readouterr().err
    assert main(["switch", "-i", "1@tsdnosuchif0", "--grpc-server-addr", "none"]) == 2
    assert "interface 'tsdnosuchif0' does not exist" in capsys.readouterr().err


def test_pcap_round_trip(tmp_path) -> None:
    w = PcapWriter(tmp_path / "x.pcap")
    frames = [b"\x01" * 60, b"\x02" * 1514, b""]
    for f in frames:
        w.write(f)
    w.close()
    assert read_pcap(tmp_path / "x.pcap") == frames
    from scapy.utils import rdpcap
    assert [bytes(p) for p in rdpcap(str(tmp_path / "x.pcap"))][:2] == frames[:2]


def test_format_stats_table() -> None:
    snap = {"name": "s1", "device_id": 1, "packets_in": 5, "packets_out": 4, "pipeline_drops": 1,
            "pipeline_errors": 0, "no_pipeline": 0, "packet_ins": 0,
            "ports": [{"port": 1, "ifname": "s1-eth1", "rx_packets": 5, "tx_packets": 4,
                       "tail_drops": 0, "queue_depth": 0, "queue_high_water": 2, "rx_dropped": 0}]}
    text = format_stats(snap)
    assert text.splitlines()[0] == ("s1 device 1: in 5 out 4 pipeline drops 1 errors 0 "
                                    "no-pipeline 0 packet-in 0")
    assert text.splitlines()[2].split() == ["1", "s1-eth1", "5", "4", "0", "0", "2", "0"]
    assert all(len(line) < 80 for line in text.splitlines())


def test_argparse_types_are_wired() -> None:
    from softswitch.__main__ import build_parser
    args = build_parser().parse_args(["switch", "-i", "1@a", "-i", "2@b", "--queue-rate", "2:10",
                                      "--queue-depth", "2:16", "--cpu-port", "255"])
    assert isinstance(args, argparse.Namespace)
    assert args.interfaces == [(1, "a"), (2, "b")] and args.queue_rate == [(2, 10e6)]
    assert args.queue_depth == [(2, 16)] and args.cpu_port == 255


def test_switch_device_in_process_packet_out_and_packet_in() -> None:
    """The Device contract without interfaces: packet-out to the CPU port comes back as a
    packet-in; a frame for a port with no interface is counted."""
    import queue
    from pathlib import Path

    from softswitch.p4runtime.device import Device
    from softswitch.targets.python.daemon import load_pipeline
    from softswitch.targets.python.device import SwitchDevice

    program = Path(__file__).resolve().parent / "switchd_test.p4"
    dev = SwitchDevice({}, device_id=3)
    assert isinstance(dev, Device)
    got: queue.Queue = queue.Queue()

    class L:
        def on_packet_in(self, pkt) -> None:
            got.put(pkt)

        def on_digest(self, name, values) -> None:
            pass

    dev.add_listener(L())
    dev.set_pipeline(load_pipeline(SwitchOptions(program=str(program))))
    dev.tm.set_rate(7, 1e6)
    dev.start()
    try:
        frame = bytes(Ether(dst="00:00:00:00:00:02") / IP(dst="10.0.0.2") / UDP(dport=1) / b"hi")
        dev.packet_out(frame, {"egress_port": 510})
        pkt = got.get(timeout=5)
        assert pkt.payload == frame and pkt.metadata["ingress_port"] == 510
        dev.packet_out(frame, {"egress_port": 7})      # paced, then no interface there
        deadline = time.monotonic() + 5
        while dev.counters.no_such_port == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        snap = dev.snapshot()
        assert snap["no_such_port"] == 1 and snap["packet_ins"] == 1
        assert [p["port"] for p in snap["ports"]] == [7, 510]
    finally:
        dev.stop()


@pytest.mark.parametrize("v6", [False, True], ids=["tcpv4", "tcpv6"])
def test_segment_tcp_cuts_like_a_nic(v6: bool) -> None:
    from scapy.layers.inet import TCP
    from scapy.layers.inet6 import IPv6

    from softswitch.switchd.gso import GSO_TCPV4, GSO_TCPV6, segment_tcp
    data = bytes(range(256)) * 20                         # 5120 bytes
    l3 = IPv6(src="fd00::1", dst="fd00::2") if v6 else IP(src="10.0.0.1", dst="10.0.0.2", id=7)
    big = Ether() / l3 / TCP(sport=1, dport=2, seq=1000, flags="PAF") / data
    raw = bytearray(bytes(big))
    segs = segment_tcp(raw, GSO_TCPV6 if v6 else GSO_TCPV4, 1448)
    assert segs is not None and len(segs) == 4
    got = b""
    for i, seg in enumerate(segs):
        p = Ether(seg)
        again = Ether(seg)
        del again[TCP].chksum
        if not v6:
            del again[IP].chksum
            assert again[IP].chksum is None
            assert Ether(bytes(again))[IP].chksum == p[IP].chksum
            assert p[IP].id == 7 + i and p[IP].len == len(seg) - 14
        else:
            assert p[IPv6].plen == len(seg) - 54
        assert Ether(bytes(again))[TCP].chksum == p[TCP].chksum
        assert p[TCP].seq == 1000 + 1448 * i
        assert str(p[TCP].flags) == ("A" if i < 3 else "FPA")
        got += bytes(p[TCP].payload)
    assert got == data


def test_segment_tcp_refuses_what_it_cannot_cut() -> None:
    from softswitch.switchd.gso import GSO_TCPV4, segment_tcp
    udp = bytes(Ether() / IP() / UDP() / (b"x" * 3000))
    assert segment_tcp(udp, GSO_TCPV4, 1000) is None
    assert segment_tcp(udp[:20], GSO_TCPV4, 1000) is None
    assert segment_tcp(udp, 5, 1000) is None


def test_cli_reports_program_and_entries_errors_with_locations(tmp_path, capsys) -> None:
    from softswitch.__main__ import main
    bad = tmp_path / "bad.p4"
    bad.write_text("#include <core.p4>\n#include <v1model.p4>\nheader h_t { bit<8> x }\n")
    assert main(["switch", str(bad), "--grpc-server-addr", "none"]) == 2
    assert capsys.readouterr().err.strip() == (f"{bad}:3:23: error: syntax error: unexpected '}}' "
                                               "(expected ';')")
    from pathlib import Path
    good = Path(__file__).resolve().parent / "switchd_test.p4"
    entries = tmp_path / "e.txt"
    entries.write_text("add MyIngress.nosuchtable 1 MyIngress.set_port(port:2)\n")
    assert main(["switch", str(good), "--entries", str(entries), "--grpc-server-addr", "none"]) == 2
    err = capsys.readouterr().err
    assert str(entries) in err and "nosuchtable" in err, err
    assert main(["switch", str(good), "--no-p4"]) == 2
    assert "--no-p4 and a program" in capsys.readouterr().err


def test_depart_due_helps_in_order_and_one_at_a_time() -> None:
    """A second thread may run due departures; per port they stay in order."""
    order: list[int] = []
    tm = _tm(lambda item, info: order.append(item))
    tm.set_rate(1, 1e9)
    assert tm.paced
    for i in range(20):
        tm.enqueue(1, i, 100)
    time.sleep(0.001)
    assert tm.depart_due(limit=5) == 5
    tm.start()
    try:
        deadline = time.monotonic() + 5
        while len(order) < 20 and time.monotonic() < deadline:
            tm.depart_due()
        while len(order) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        tm.stop()
    assert order == list(range(20))
    assert tm.queues[1].in_flight == 0


def test_tm_paces_the_bytes_the_port_sent() -> None:
    """Egress that adds bytes (an INT hop, a link sequence header) is charged for them:
    the port's rate holds on the wire, not on the queued length."""
    stamps: list[int] = []
    done = threading.Event()

    def depart(item: object, info: QueueInfo) -> int:
        stamps.append(time.monotonic_ns())
        if len(stamps) == 6:
            done.set()
        return 2000          # each 1000-byte packet leaves as 2000 bytes

    tm = _tm(depart)
    tm.set_rate(2, 1e6)      # 2000 bytes on the wire: 16 ms each, not 8
    for i in range(6):
        assert tm.enqueue(2, i, 1000)
    started = time.monotonic_ns()
    tm.start()
    try:
        assert done.wait(5)
    finally:
        tm.stop()
    # from the start, not from the first departure: a first departure that left late
    # (a loaded host) lets the next ones catch up on the schedule, which is the rate
    # kept; the sixth can never leave before five 16 ms slots have passed
    assert stamps[-1] - started >= 5 * 16e6 * 0.95
