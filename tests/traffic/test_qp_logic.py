"""Reliability state machines on a simulated link: exact loss patterns, no sockets."""
from __future__ import annotations

import os
import random
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.loss import LossModel, LossProcess
from formats import roce
from traffic import fec
from traffic.errors import FecError
from traffic.qp_types import QpConfig, Reliability
from traffic.requester import WIRE_OVERHEAD, Requester
from traffic.responder import Responder
from traffic.simlink import SimLink


def _pair(mode: str, *, start_psn: int = 0, rate_bps: float = 1e9, window: int = 128,
          k: int = 8, m: int = 1, mtu: int = 1024) -> tuple[Requester, Responder]:
    req = Requester(cfg=QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", mode=mode,
                                 rate_bps=rate_bps, window_pkts=window, fec_k=k, fec_m=m,
                                 mtu=mtu),
                    local_ip="10.0.0.1", sport=1000, start_psn=start_psn)
    resp = Responder(cfg=QpConfig(qpn=2, peer_qpn=1, peer_ip="10.0.0.1", mode=mode,
                                  window_pkts=window, mtu=mtu),
                     local_ip="10.0.0.2", sport=2000, start_psn=start_psn)
    return req, resp


def _run(req: Requester, resp: Responder, msgs: list[bytes], drop, delay_s: float = 0.002):
    for m in msgs:
        req.post_write(m)
    link = SimLink(req=req, resp=resp, delay_s=delay_s, drop=drop)
    res = link.run(until=lambda: req.idle and resp.counters.msgs_done == len(msgs))
    assert [m.crc32 for m in resp.messages] == [zlib.crc32(m) for m in msgs]
    assert [m.size for m in resp.messages] == [len(m) for m in msgs]
    return res


def _msgs(n: int, seed: int = 0) -> list[bytes]:
    rng = random.Random(seed)
    return [rng.randbytes(rng.randint(1, 9000)) for _ in range(n)]


def _bernoulli(p: float, seed: int = 5):
    model = LossProcess(LossModel.bernoulli(p), seed=seed)
    return lambda n, b: model.lost()


def _bursty(seed: int = 5):
    model = LossProcess(LossModel.gilbert_elliott(p=0.01, r=0.3, h=0.0), seed=seed)
    return lambda n, b: model.lost()


@pytest.mark.parametrize("loss", ["random", "bursty"])
def test_selective_repeat_retransmits_exactly_the_lost(loss: str) -> None:
    req, resp = _pair("sr", start_psn=0xFFFFF0)  # crosses the 24-bit PSN wrap
    drop = _bernoulli(0.03) if loss == "random" else _bursty()
    res = _run(req, resp, _msgs(60), drop)
    assert res.data_dropped > 0
    assert req.counters.retx_pkts == res.data_dropped
    assert resp.counters.duplicates == 0
    assert sum(m.retx_pkts for m in req.messages) == req.counters.retx_pkts
    assert all(m.fct_s is not None and m.fct_s > 0 for m in req.messages)


@pytest.mark.parametrize("loss", ["random", "bursty"])
def test_go_back_n_recovers_with_naks(loss: str) -> None:
    req, resp = _pair("gbn", start_psn=0xFFFFF0)
    drop = _bernoulli(0.02) if loss == "random" else _bursty()
    res = _run(req, resp, _msgs(40), drop)
    assert res.data_dropped > 0
    assert req.counters.retx_pkts >= res.data_dropped
    assert req.counters.naks_rx >= 1 and resp.counters.naks_tx == req.counters.naks_rx
    assert resp.counters.ooo_dropped > 0  # go-back-N discards what follows a hole


@pytest.mark.parametrize("k,m", [(8, 1), (8, 2), (16, 4)])
def test_fec_repairs_and_selective_repeat_does_the_rest(k: int, m: int) -> None:
    req, resp = _pair("fec", k=k, m=m)
    res = _run(req, resp, _msgs(60, seed=2), _bernoulli(0.04, seed=9))
    c, rc = req.counters, resp.counters
    assert rc.fec_repaired > 0
    assert c.retx_pkts < res.data_dropped  # FEC saved retransmissions
    assert c.retx_pkts + rc.fec_repaired >= res.data_dropped
    assert c.repair_pkts >= c.tx_data_pkts * m // k
    assert sum(x.fec_repaired for x in resp.messages) == rc.fec_repaired


@pytest.mark.parametrize("loss", [None, 0.02])
def test_a_window_limited_qp_pays_for_full_blocks_only(loss: float | None) -> None:
    """Under a window-based CC the QP is window-blocked after nearly every packet; each
    block closed there carried its m repairs for one or two packets (the demo's WAN QPs
    sent 12 % repairs at k=32, m=1).  Now a block closes when blocked only with half of
    it open: at most 2 m / k repairs per packet, plus the message tail's block."""
    k, m = 32, 1
    req, resp = _pair("fec", k=k, m=m, window=8, rate_bps=1e8)
    msgs = [bytes(range(256)) * 1024] * 2          # 2 x 256 packets
    res = _run(req, resp, msgs, (lambda n, b: False) if loss is None
               else _bernoulli(loss, seed=3), delay_s=0.01)
    data = req.counters.tx_data_pkts
    assert data == 512
    assert req.counters.repair_pkts <= 2 * m * data // k + 2 * m
    if loss is not None:
        assert res.data_dropped > 0
        assert resp.counters.fec_repaired + req.counters.retx_pkts >= res.data_dropped


def test_fec_bursty_loss_delivers_everything() -> None:
    req, resp = _pair("fec", k=8, m=2)
    res = _run(req, resp, _msgs(60, seed=3), _bursty(seed=14))  # a seed that loses some
    assert res.data_dropped > 0
    assert resp.counters.fec_repaired + req.counters.retx_pkts >= res.data_dropped


def test_fec_parameters_change_at_run_time() -> None:
    req, _resp = _pair("fec", k=4, m=1)
    for msg in _msgs(5):
        req.post_write(msg)
    out: list[bytes] = []
    req.poll(0.0, out, budget=4)
    assert sum(1 for b in out if b[0] == roce.Opcode.FEC_REPAIR) == 0
    req.set_fec(2, 2, 0.0)
    out.clear()
    req.poll(0.0, out, budget=50)
    repairs = [roce.parse_udp_payload(b).fec for b in out if b[0] == roce.Opcode.FEC_REPAIR]
    assert repairs[0].k == 4 and repairs[0].m == 1  # the open block, closed by the change
    assert all(r.k == 2 and r.m == 2 for r in repairs[1:]) and len(repairs) > 2
    assert req.fec_log[-1][1:] == (2, 2)


def test_rate_change_takes_effect_within_one_rtt() -> None:
    rtt = 0.020
    req, _resp = _pair("sr", rate_bps=10e6, window=4000)
    for _ in range(20):
        req.post_write(os.urandom(100_000))
    out: list[bytes] = []
    t = 0.0
    while t < 0.1:  # steady state at 10 Mb/s
        req.poll(t, out)
        t += 0.0005
    req.set_rate(100e6, t)
    change_t = t
    sent_before = sum(len(b) + WIRE_OVERHEAD for b in out)
    while t < change_t + rtt:
        req.poll(t, out)
        t += 0.0005
    sent = sum(len(b) + WIRE_OVERHEAD for b in out) - sent_before
    rate = sent * 8 / rtt
    assert 80e6 <= rate <= 110e6, rate
    assert req.rate_log[-1] == (change_t, 100e6)


def test_responder_counts_and_drops_unexpected_packets() -> None:
    req, resp = _pair("sr", start_psn=100)
    bad = roce.parse_udp_payload(roce.build_udp_payload(
        src="10.0.0.1", dst="10.0.0.2", sport=1, opcode=roce.Opcode.WRITE_MIDDLE, dest_qp=2,
        psn=100 + 100_000, payload=bytes(1024)))
    resp.on_packet(bad, 0.0)
    assert resp.counters.psn_out_of_window == 1
    ack = roce.parse_udp_payload(roce.build_udp_payload(
        src="10.0.0.1", dst="10.0.0.2", sport=1, opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=2,
        psn=100, aeth=(roce.AethSyndrome.ACK, 0)))
    resp.on_packet(ack, 0.0)
    assert resp.counters.bad_opcode == 1
    short = roce.parse_udp_payload(roce.build_udp_payload(
        src="10.0.0.1", dst="10.0.0.2", sport=1, opcode=roce.Opcode.WRITE_FIRST, dest_qp=2,
        psn=100, reth=(0, 1, 5000), payload=bytes(10)))
    resp.on_packet(short, 0.0)  # FIRST must carry a full MTU
    assert resp.counters.bad_length == 1
    # the QP is undisturbed
    res = _run(req, resp, _msgs(5), lambda n, b: False)
    assert res.delivered == 5 and resp.counters.duplicates == 0


def test_erasure_code_recovers_any_m_losses() -> None:
    rng = random.Random(1)
    for k, m in [(1, 1), (5, 1), (8, 2), (12, 4), (128, 3)]:
        data = [rng.randbytes(40) for _ in range(k)]
        rep = fec.encode(data, m)
        if m == 1:
            x = bytearray(40)
            for d in data:
                x = bytearray(a ^ b for a, b in zip(x, d))
            assert rep[0] == bytes(x)  # m = 1 is plain XOR
        for _ in range(10):
            lost = set(rng.sample(range(k + m), m))
            have = {i: data[i] for i in range(k) if i not in lost}
            reps = {j: rep[j] for j in range(m) if k + j not in lost}
            for i, s in fec.decode(k, m, have, reps).items():
                assert s == data[i]


def test_erasure_code_refuses_too_many_losses() -> None:
    data = [bytes([i]) * 8 for i in range(4)]
    rep = fec.encode(data, 1)
    with pytest.raises(FecError, match="2 data symbols missing but only 1 repair"):
        fec.decode(4, 1, {0: data[0], 1: data[1]}, {0: rep[0]})


def test_config_errors_name_the_field() -> None:
    from traffic.errors import ConfigError

    with pytest.raises(ConfigError, match="mtu=10"):
        QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.1", mtu=10)
    with pytest.raises(ConfigError, match="fec_m=40"):
        QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.1", fec_m=40)
    with pytest.raises(ConfigError, match="reliability mode 'xyz'"):
        Reliability.parse("xyz")


@pytest.mark.parametrize("mode", ["sr", "fec", "gbn"])
def test_tail_loss_is_recovered_by_one_timeout(mode: str) -> None:
    req, resp = _pair(mode, m=0 if mode == "fec" else 1)  # FEC with m=0: plain SR
    dropped: set[int] = set()

    def drop(n: int, b: bytes) -> bool:
        psn = roce.unpack_bth(b).psn
        if psn in (3, 4) and psn not in dropped:
            dropped.add(psn)
            return True
        return False

    res = _run(req, resp, [os.urandom(5000)], drop)
    assert res.data_dropped == 2
    assert req.counters.timeouts == 1
    assert req.counters.retx_pkts == 2


def test_spurious_timeout_does_not_trigger_a_retransmission_storm() -> None:
    """An ACK for the original of a packet resent by a (spurious) timeout must not make
    every packet sent before the resend look lost."""
    req, resp = _pair("sr", rate_bps=1e9, window=1000)
    req.cfg.rto_min_s = 0.001
    req.post_write(os.urandom(400_000))
    out: list[bytes] = []
    req.poll(0.0, out, budget=1000)  # the whole message leaves at t=0
    # an early ACK gives an RTT sample of 20 ms
    for b in out[:1]:
        resp.on_packet(roce.parse_udp_payload(b), 0.010)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), 0.020)
    # the ACKs of the rest are late: the timer fires and resends the oldest one
    req.poll(0.2, out, budget=1000)
    assert req.counters.timeouts == 1 and req.counters.retx_pkts == 1
    # now the late ACK of the originals arrives, shortly after the resend
    for b in out[1:196]:
        resp.on_packet(roce.parse_udp_payload(b), 0.2)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), 0.201)
    out.clear()
    req.poll(0.201, out, budget=1000)
    assert req.counters.retx_pkts == 1  # no storm


def test_absurd_dma_length_is_refused_not_allocated() -> None:
    req, resp = _pair("sr")
    pkt = roce.parse_udp_payload(roce.build_udp_payload(
        src="10.0.0.1", dst="10.0.0.2", sport=1, opcode=roce.Opcode.WRITE_ONLY, dest_qp=2,
        psn=0, reth=(0, 1, 0xFFFFFFFF), payload=b"x"))
    resp.on_packet(pkt, 0.0)
    assert resp.counters.bad_length == 1 and resp.counters.msgs_done == 0
    # the PSN was not consumed: the real packet 0 is still expected
    res = _run(req, resp, _msgs(3), lambda n, b: False)
    assert res.delivered == 3 and resp.counters.duplicates == 0


def test_out_of_sequence_opcode_does_not_take_the_psn() -> None:
    req, resp = _pair("sr")
    pkt = roce.parse_udp_payload(roce.build_udp_payload(
        src="10.0.0.1", dst="10.0.0.2", sport=1, opcode=roce.Opcode.WRITE_LAST, dest_qp=2,
        psn=0, payload=b"forged"))
    resp.on_packet(pkt, 0.0)
    assert resp.counters.bad_opcode == 1
    res = _run(req, resp, _msgs(3), lambda n, b: False)
    assert res.delivered == 3 and resp.counters.duplicates == 0


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 40), m=st.integers(1, 8), n=st.integers(1, 64), data=st.data())
def test_erasure_code_property(k: int, m: int, n: int, data) -> None:
    rng = random.Random(k * 1000 + m * 10 + n)
    syms = [rng.randbytes(n) for _ in range(k)]
    rep = fec.encode(syms, m)
    lost = set(data.draw(st.sets(st.integers(0, k + m - 1), max_size=m)))
    have = {i: syms[i] for i in range(k) if i not in lost}
    reps = {j: rep[j] for j in range(m) if k + j not in lost}
    got = fec.decode(k, m, have, reps)
    assert got == {i: syms[i] for i in range(k) if i in lost}


def test_a_late_ack_costs_one_packet_not_a_window() -> None:
    """A peer descheduled past the timer: the timer resends the oldest packet only, the
    late ACK (for the originals) declares nothing lost, and the timeout is recognised
    as spurious, raising the QP's timer floor above the delay that caused it."""
    req, resp = _pair("sr", window=64)
    req.post_write(bytes(40 * 1024), now=0.0)
    out: list[bytes] = []
    req.poll(0.0, out, budget=1000)
    assert len(out) == 40
    originals = list(out)
    out.clear()
    req.poll(0.2, out, budget=1000)      # no ACK for 200 ms: the timer fires
    assert len(out) == 1 and req.counters.timeouts == 1
    for buf in originals:                # the peer wakes up: the originals arrive ...
        resp.on_packet(roce.parse_udp_payload(buf), 0.21)
    ack = resp.take_ack()
    assert ack is not None
    req.on_ack(roce.parse_udp_payload(ack), 0.22)   # ... and the ACK covers them all
    assert req.idle and req.counters.retx_pkts == 1
    assert req.counters.spurious_timeouts == 1
    assert req.snapshot()["rto_s"] >= 0.22


def test_a_partial_late_ack_declares_nothing_in_flight_lost() -> None:
    """The late ACK covers only the first half: the second half, sent before the
    timer's retransmission, is still in flight, not lost."""
    req, resp = _pair("sr", window=64)
    req.post_write(bytes(40 * 1024), now=0.0)
    out: list[bytes] = []
    req.poll(0.0, out, budget=1000)
    originals = list(out)
    out.clear()
    req.poll(0.2, out, budget=1000)
    for buf in originals[:20]:
        resp.on_packet(roce.parse_udp_payload(buf), 0.21)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), 0.22)
    out.clear()
    req.poll(0.221, out, budget=1000)
    assert out == [] and req.counters.retx_pkts == 1
    for buf in originals[20:]:
        resp.on_packet(roce.parse_udp_payload(buf), 0.23)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), 0.24)
    assert req.idle and req.counters.retx_pkts == 1


@pytest.mark.parametrize("mode", ["sr", "fec"])
def test_a_second_timeout_resends_every_overdue_packet(mode: str) -> None:
    """The tail of what was sent is lost and stays lost: the first timeout probes with
    the oldest packet alone, the second (no progress in between) resends every other
    unacknowledged packet sent at least a base timeout ago, and leaves the ones sent
    since in flight; then everything is delivered."""
    req, resp = _pair(mode, window=64)
    req.post_write(bytes(1024), now=0.0)             # one round trip for an RTT sample
    out: list[bytes] = []
    req.poll(0.0, out, budget=1000)
    for buf in out:
        resp.on_packet(roce.parse_udp_payload(buf), 0.005)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), 0.01)
    assert req.idle and req.srtt_s is not None
    out.clear()
    t0 = 0.01
    req.post_write(bytes(20 * 1024), now=t0)
    req.poll(t0, out, budget=1000)
    assert len(out) >= 20                # 20 data packets (and repairs in mode fec)
    base = req.snapshot()["rto_s"]
    out.clear()
    req.poll(t0 + base, out, budget=1000)            # the first timeout: one probe
    assert len(out) == 1 and req.counters.timeouts == 1
    second_at = t0 + base + 2 * base                 # the timer backed off
    late = second_at - base / 2                      # a message sent since: in flight
    req.post_write(bytes(4 * 1024), now=late)
    out.clear()
    req.poll(late, out, budget=1000)
    recent = list(out)
    assert len(recent) >= 4
    out.clear()
    req.poll(second_at, out, budget=1000)            # the second timeout
    assert req.counters.timeouts == 2
    assert len(out) == 20                # the probe again + every overdue data packet
    for buf in out + recent:
        resp.on_packet(roce.parse_udp_payload(buf), second_at + 0.01)
    req.on_ack(roce.parse_udp_payload(resp.take_ack()), second_at + 0.02)
    assert req.idle and resp.counters.msgs_done == 3


def test_go_back_n_resends_from_the_oldest_at_every_timeout() -> None:
    req, _resp = _pair("gbn", window=64)
    req.post_write(bytes(10 * 1024), now=0.0)
    out: list[bytes] = []
    req.poll(0.0, out, budget=1000)
    n = len(out)
    base = req.snapshot()["rto_s"]
    out.clear()
    req.poll(base, out, budget=1000)
    assert len(out) == n
    out.clear()
    req.poll(3 * base, out, budget=1000)
    assert len(out) == n and req.counters.timeouts == 2
