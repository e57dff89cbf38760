"""RED-style ECN marking on queue bytes, and the MTU guard (no INT rather than a drop).

For marking probabilities the test plays the traffic manager itself: it runs
ingress for a burst (so the queue bytes register holds the whole burst), then
egress one packet at a time with deq_qdepth = packets still queued."""
from __future__ import annotations

import math

from tests.helpers.p4int import H2_MAC, Chain, IntSwitch, roce_frame, split_int


def ecn_switch(make_program, kmin: int, kmax: int, pmax: int) -> IntSwitch:
    s = IntSwitch.build(1, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    s.ecn(2, kmin, kmax, pmax)
    return s


def burst_marks(s: IntSwitch, frames: list[bytes]) -> list[tuple[int, int]]:
    """(queue bytes after dequeue, ECN field) of each packet of a queued burst."""
    from softswitch.v1model.jobs import IngressJob
    jobs = []
    for f in frames:
        _, eg = s.switch.run_ingress(IngressJob(port=1, data=f))
        jobs.extend(eg)
    out = []
    remaining = sum(len(f) for f in frames)
    for k, job in enumerate(jobs):
        job.sm.deq_qdepth = len(jobs) - k - 1
        remaining -= len(frames[k])
        _, _, outs = s.switch.run_egress(job)
        (o,) = outs
        out.append((remaining, split_int(o.data)["ecn"]))
    return out


def test_marking_is_certain_at_kmax_and_absent_below_kmin(make_program):
    s = ecn_switch(make_program, kmin=0, kmax=0, pmax=0)
    for ecn in (1, 2):
        (_port, data), = s.process(1, roce_frame(tos=ecn))
        assert split_int(data)["ecn"] == 3
    (_port, data), = s.process(1, roce_frame(tos=0))          # not ECN-capable
    assert split_int(data)["ecn"] == 0
    assert s.runtime.counter_read("SwitchEgress.ecn_marked", 2)[0] == 2
    # With Kmin above any queue nothing is marked.
    s2 = ecn_switch(make_program, kmin=10**6, kmax=2 * 10**6, pmax=65535)
    marks = burst_marks(s2, [roce_frame(tos=2, psn=i) for i in range(50)])
    assert all(e == 2 for _, e in marks)


def test_marking_probability_rises_from_kmin_to_kmax(make_program):
    frames = [roce_frame(tos=1, psn=i, payload=bytes(200)) for i in range(600)]
    size = len(frames[0])
    kmin, kmax, pmax = 100 * size, 500 * size, 32768          # Pmax = 0.5
    s = ecn_switch(make_program, kmin, kmax, pmax)
    marks = burst_marks(s, frames)
    expect, var, marked = 0.0, 0.0, 0
    for q, ecn in marks:
        if q >= kmax:
            p = 1.0
            assert ecn == 3
        elif q <= kmin:
            p = 0.0
            assert ecn == 1
        else:
            p = pmax / 65536 * (q - kmin) / (kmax - kmin)
        expect += p
        var += p * (1 - p)
        marked += ecn == 3
    assert abs(marked - expect) < 5 * math.sqrt(var) + 1, (marked, expect, var)
    assert s.runtime.counter_read("SwitchEgress.ecn_marked", 2)[0] == marked


def test_queue_bytes_follow_the_queue(make_program):
    s = ecn_switch(make_program, 10**9, 10**9, 0)
    frames = [roce_frame(psn=i) for i in range(5)]
    marks = burst_marks(s, frames)
    size = len(frames[0])
    assert [q for q, _ in marks] == [4 * size, 3 * size, 2 * size, size, 0]
    assert s.reg("queue_bytes", 2) == 0


def test_mtu_guard_sends_without_int_at_the_source(make_program):
    chain = Chain.build(2, make_program)
    frame = roce_frame(payload=bytes(400))
    l3 = len(frame) - 14
    s1 = chain.switches[0]
    # Room for the packet but not for 16 B of INT + 28 B of hop + 6 B link header.
    s1.runtime.table_modify("SwitchEgress.port_mtu", [_exact(2)], "set_mtu", [l3 + 16 + 28 + 5])
    out = chain.send(frame)
    assert [p for p, _ in out] == [2]
    d = split_int(out[0][1])
    assert d["udp"][1] == 4791                                 # no INT
    assert s1.event("mtu_skip_source") == 1 and s1.event("source_insert") == 0
    # One more byte of MTU and INT goes in.
    s1.runtime.table_modify("SwitchEgress.port_mtu", [_exact(2)], "set_mtu", [l3 + 16 + 28 + 6])
    d = split_int(chain.send(frame)[0][1])
    assert d["udp"][1] == 7777 and d["shim_len"] == 3 + 14


def test_mtu_guard_at_transit_sets_m_and_keeps_the_packet(make_program):
    chain = Chain.build(3, make_program)
    frame = roce_frame(payload=bytes(400))
    l3 = len(frame) - 14
    s2 = chain.switches[1]
    # s2's egress (fabric, +6) has room for s1's INT but not for s2's record.
    s2.runtime.table_modify("SwitchEgress.port_mtu", [_exact(2)], "set_mtu",
                            [l3 + 16 + 28 + 6 + 27])
    out = chain.send(frame)
    d = split_int(out[0][1])
    assert d["m"] == 1
    from tests.helpers.p4int import decode_hop_words
    hops = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
    assert [h["node_id"] for h in hops] == [3, 1]
    assert s2.event("mtu_skip_transit") == 1


def _exact(v: int):
    from softswitch.tables import Exact
    return Exact(v)


def test_hop_records_report_the_queue(make_program):
    """Queue occupancy (packets) and queue bytes in each hop record follow a burst."""
    from softswitch.v1model.jobs import IngressJob
    from tests.helpers.p4int import decode_hop_words
    s = IntSwitch.build(1, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    s.watch()
    frames = [roce_frame(psn=i) for i in range(6)]
    jobs = []
    for f in frames:
        jobs.extend(s.switch.run_ingress(IngressJob(port=1, data=f))[1])
    assert s.reg("queue_bytes", 2) == sum(len(f) for f in frames)
    sent = 0
    for k, job in enumerate(jobs):
        job.sm.deq_qdepth = len(jobs) - k - 1
        (o,) = s.switch.run_egress(job)[2]
        d = split_int(o.data)
        (hop,) = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
        assert hop["queue_occupancy"] == len(jobs) - k - 1
        assert hop["queue_bytes"] == sum(len(f) for f in frames[k + 1:])
        assert hop["tx_bytes"] == sent
        sent += len(o.data)
    assert s.reg("SwitchEgress.last_queue_occupancy", 2) == 0
