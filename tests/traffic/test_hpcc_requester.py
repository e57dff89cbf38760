"""A requester QP with ``cc=hpcc-sender``: ACKs with echoed hops drive its pacer and its
window; the reaction (first echoed queue -> first cut) is timed; feedback caps it."""
from __future__ import annotations

from formats.int_echo import EchoHop
from traffic.qp_types import QpConfig
from traffic.requester import Requester

RATE = 4e6   # the line rate of conftest's hpcc_requester QPs


def test_echoed_queue_cuts_the_rate_and_bounds_the_window(hpcc_requester, echo_ack):
    r = hpcc_requester(base_rtt_s=0.01)
    # window from the start: W = R T = 4e6 * 0.01 / 8 = 5000 B -> 5 packets of 1090 B
    assert r._win_pkts == 5
    r.post_write(bytes(20 * 1024), now=0.0)
    out: list[bytes] = []
    r.poll(0.0, out)
    # ns-3's pacing: one packet now, the next size / R = 2.2 ms later, no burst
    assert len(out) == 1
    r.poll(0.002, out)
    assert len(out) == 1
    for t in (0.0025, 0.005, 0.0075):
        r.poll(t, out)
    # 4 packets out: an echo on an ACK of an unsent one is refused
    assert r.echo_guard is not None and len(out) == 4
    for p in range(4):
        pkt, hops = echo_ack(p, [EchoHop(1, 1000 * (p + 1), 500 * p, 0 if p < 2 else 5000, 4)])
        r.on_ack(pkt, (11 + p) / 1000)
        r.on_int_echo(hops, pkt, (11 + p) / 1000)
    hp = r.hpcc
    assert hp is not None and r.counters.echo_acks == 4
    # 500 B per ms = 4 Mbit/s = B: u = 1 from the second ACK on, a first cut to R / 1.05;
    # the third reports 5000 B queued (min with the second's 0 keeps its term at 0), the
    # fourth again: min(5000, 5000) * R / B / W = 1 more -> a deeper cut
    assert r.cfg.rate_bps < RATE / 1.05 and r.rate_log[-1][1] == r.cfg.rate_bps
    assert r.cc.first_queue_s == 0.013 and r.cc.first_cut_s == 0.014
    snap = r.snapshot()["hpcc"]
    assert abs(snap["reaction_s"] - 0.001) < 1e-9 and snap["max_echo_queue_bytes"] == 5000
    assert snap["window_pkts"] == r._win_pkts <= 5


def test_feedback_caps_hpcc_and_plain_qps_only_count_echoes(hpcc_requester, echo_ack):
    r = hpcc_requester(base_rtt_s=0.01)
    r.set_rate(1e6, 0.0)
    assert r.cfg.rate_bps == 1e6 and r.hpcc is not None and r.hpcc.rate_bps == RATE
    plain = Requester(cfg=QpConfig(qpn=5, peer_qpn=5, peer_ip="10.0.0.9", rate_bps=RATE),
                      local_ip="10.0.0.1", sport=1)
    pkt, hops = echo_ack(0, [EchoHop(1, 1, 1, 1, 4)])
    plain.on_int_echo(hops, pkt, 0.0)
    assert plain.counters.echo_acks == 1 and plain.hpcc is None and plain.cfg.rate_bps == RATE


def test_late_wake_ups_cost_no_rate_and_idle_time_earns_no_burst(hpcc_requester):
    """ns-3's NIC sends a QP's next packet size / R after the previous one was due: a
    loop that always wakes 1 ms late still sends at R, and a QP that had nothing to send
    starts again with one packet, not a burst."""
    r = hpcc_requester(base_rtt_s=1.0)       # a window that never binds here
    r.post_write(bytes(40 * 1024), now=0.0)
    out: list[bytes] = []
    due = r.poll(0.0, out)
    while due is not None and len(out) < 30:
        due = r.poll(due + 0.001, out)  # every wake-up 1 ms late
    gap = (1024 + 12 + 16 + 4 + 42) * 8 / RATE   # 2.2 ms per packet at 4 Mbit/s
    assert due is not None and due < 30 * gap + 0.002   # 1 ms late each time: 30 x 3.2 ms
    idle = hpcc_requester(base_rtt_s=1.0)
    idle.post_write(bytes(1024), now=0.0)
    out = []
    idle.poll(0.0, out)
    idle.post_write(bytes(4 * 1024), now=0.5)       # half a second with nothing to send
    idle.poll(0.5, out)
    assert len(out) == 2                             # one packet, then paced again


def test_fec_repair_packets_pass_the_one_packet_pacer() -> None:
    """A repair packet is larger than a full data packet, which is all the per-packet
    pacer holds: it must still go (it stalled the QP for good: the demo's default)."""
    from traffic.cc.hpcc import HpccSettings
    from traffic.qp_types import Reliability

    cfg = QpConfig(qpn=0x10000, peer_qpn=0x10000, peer_ip="10.0.0.9", rate_bps=RATE,
                   cc="hpcc-sender", mode=Reliability.FEC, fec_k=8, fec_m=1,
                   window_pkts=64, rto_min_s=10.0, hpcc=HpccSettings(window=False))
    r = Requester(cfg=cfg, local_ip="10.0.0.1", sport=50000)
    r.post_write(bytes(16 * 1024), now=0.0)
    out: list[bytes] = []
    t = 0.0
    while t < 0.02:   # 18 packets of ~1.1 kB at 4 Mbit/s take ~40 ms
        r.poll(t, out)
        t += 0.001
    assert len(out) < 18
    while t < 1.0:
        r.poll(t, out)
        t += 0.001
    assert r.counters.tx_data_pkts == 16 and r.counters.repair_pkts == 2 and len(out) == 18
