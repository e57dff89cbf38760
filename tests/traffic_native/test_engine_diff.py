"""Differential tests: the native engine against the Python state machines.

The engine runs in step mode (no thread, no socket, an injected clock) next to
:class:`traffic.requester.Requester` and :class:`traffic.responder.Responder` with
the same configuration.  A seeded random network between them drops, duplicates,
reorders and delays data packets and ACKs; rate and FEC settings change in the
middle of messages; PSNs start just below the 24-bit wrap.  After every event both
implementations must have produced the same bytes (data, retransmissions, repair
packets, ACK/NAK/SACK) and report the same next due time and counters.
"""
from __future__ import annotations

import random
import zlib

import pytest

from common.loss import LossModel
from formats import int_echo, roce
from traffic import recovery
from traffic.cc import HpccSettings
from traffic.errors import ConfigError
from traffic.native_endpoint import StepEngine, engine_available, erasure_code_works
from traffic.qp_types import QpConfig, Reliability
from traffic.requester import Requester
from traffic.responder import Responder

pytestmark = pytest.mark.skipif(not engine_available(),
                                reason="native engine not built (make -C traffic/native)")

A, B = "10.9.0.1", "10.9.0.2"
SA, SB = 50001, 50002
QPN = 0x010203


def _cfgs(mode: Reliability, rng: random.Random,
          cc: str) -> tuple[QpConfig, QpConfig]:
    kw = {"mode": mode, "mtu": rng.choice([64, 256, 1024]),
          "rate_bps": rng.choice([1e6, 1e8, 1e10]), "window_pkts": rng.choice([4, 16, 64]),
          "fec_k": rng.choice([1, 3, 8]), "fec_m": rng.choice([1, 2]), "cc": cc,
          "hpcc": HpccSettings(min_base_rtt_s=rng.choice([1e-4, 1e-3, 0.03]),
                               multi_rate=rng.random() < 0.5, window=rng.random() < 0.7)}
    return (QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, **kw),
            QpConfig(qpn=QPN + 1, peer_qpn=QPN, peer_ip=A, **kw))


def _hops(rng: random.Random, t: float, tx: list[int]) -> list[int_echo.EchoHop]:
    """Scripted INT hop records: growing tx bytes and time, random queues; sometimes
    implausible (a line rate of 0) so the echo guard's refusals are compared too."""
    out = []
    for i in range(rng.choice([1, 1, 2])):
        tx[i] = (tx[i] + rng.randint(0, 200_000)) & 0xFFFFFFFF
        out.append(int_echo.EchoHop(node_id=i + 1, egress_ts=int(t * 1e6) & 0xFFFFFFFF,
                                    tx_bytes=tx[i], queue_bytes=rng.choice([0, 0, 3000, 60000]),
                                    line_rate=0 if rng.random() < 0.03 else 1000))
    return out


def _run(seed: int, mode: Reliability, *, events: int = 400,
         cc: str = "none") -> dict:
    rng = random.Random(seed)
    qa, qb = _cfgs(mode, rng, cc)
    start = rng.choice([0, 0xFFFFFF - 5, 0xFFFFF0, 12345])
    py_req = Requester(cfg=qa, local_ip=A, sport=SA, start_psn=start, now_s=0.0)
    py_resp = Responder(cfg=qb, local_ip=B, sport=SB, start_psn=start)
    na, nb = StepEngine(A), StepEngine(B)
    na.add_qp(qa, requester=True, sport=SA, start_psn=start)
    nb.add_qp(qb, requester=False, sport=SB, start_psn=start)
    try:
        msgs = [rng.randbytes(rng.choice([1, 63, 64, 65, 700, 3000, 9000]))
                for _ in range(rng.randint(2, 8))]
        for m in msgs:
            py_req.post_write(m, now=0.0)
            na.post_write(QPN, m)
        loss = rng.choice([0.0, 0.02, 0.1, 0.3])
        to_b: list[bytes] = []
        to_a: list[bytes] = []
        hop_tx = [0, 0]
        cnp = roce.build_cnp(src=B, dst=A, sport=SB, dest_qp=QPN)
        t = 0.0
        for _ in range(events):
            t += rng.choice([1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 0.05])
            r = rng.random()
            if r < 0.03:  # rate change mid-message
                rate = rng.choice([1e5, 1e7, 1e9])
                py_req.set_rate(rate, t)
                na.clock(t)
                na.set_rate(QPN, rate)
            elif r < 0.10 and cc == "dcqcn":  # a CNP
                py_req.on_cnp(t)
                na.inject(B, SB, cnp, t)
            elif r < 0.06 and mode is Reliability.FEC:  # (k, m) change mid-message
                k, m = rng.choice([1, 2, 5, 8, 16]), rng.choice([0, 1, 2, 3])
                py_req.set_fec(k, m, t)
                na.clock(t)
                na.set_fec(QPN, k, m)
            out_py: list[bytes] = []
            w_py = py_req.poll(t, out_py)
            w_n = na.step(t)
            out_n = [p for _, _, _, p in na.output()]
            assert out_n == out_py, f"seed {seed} t={t}: sent packets differ"
            assert w_n == w_py, f"seed {seed} t={t}: next due {w_n} != {w_py}"
            for p in out_py:  # the network: loss, duplicates
                if rng.random() >= loss:
                    to_b.append(p)
                if rng.random() < 0.05:
                    to_b.append(p)
            if rng.random() < 0.2:
                rng.shuffle(to_b)  # reordering
            n = rng.randint(0, len(to_b))
            batch, to_b = to_b[:n], to_b[n:]
            ack_py = _both_responders_take(py_resp, nb, batch, t, seed)
            if ack_py and rng.random() >= loss:
                to_a.append(ack_py)
                if rng.random() < 0.05:
                    to_a.append(ack_py)  # duplicate ACK
            if rng.random() < 0.7:
                if rng.random() < 0.2:
                    rng.shuffle(to_a)  # late ACKs
                for ack in to_a:
                    if cc == "hpcc-sender" or rng.random() < 0.2:
                        hops = _hops(rng, t, hop_tx)  # INT echoed in the ACK
                        ack = int_echo.append_echo(ack, hops)
                        data, echo = int_echo.split_echo(ack)
                        pkt = roce.parse_udp_payload(data)
                        py_req.on_ack(pkt, t)
                        py_req.on_int_echo(echo, pkt, t)
                    else:
                        py_req.on_ack(roce.parse_udp_payload(ack), t)
                    na.inject(B, SB, ack, t)
                    assert na.state(QPN).rate_bps == py_req.cfg.rate_bps, (
                        f"seed {seed} t={t}: rate {na.state(QPN).rate_bps} != "
                        f"{py_req.cfg.rate_bps}")
                to_a = []
            if py_req.idle and py_resp.counters.msgs_done == len(msgs) and not to_b:
                break
        cq = nb.completions()
        rx_crcs = [c for _, kind, _, c in cq if kind == 2]
        assert rx_crcs == [m.crc32 for m in py_resp.messages]
        assert na.counters(QPN) == py_req.counters.as_dict()
        assert nb.counters(QPN + 1) == py_resp.counters.as_dict()
        assert bool(na.state(QPN).idle) == py_req.idle
        assert na.state(QPN).rate_bps == py_req.cfg.rate_bps
        assert na.state(QPN).window_pkts == py_req._win_pkts
        return {"done": py_resp.counters.msgs_done == len(msgs),
                "rates": len(py_req.rate_log),
                "retx": py_req.counters.retx_pkts, "timeouts": py_req.counters.timeouts,
                "wrap": start > 0xFFFF00,
                "crc_ok": rx_crcs == [zlib.crc32(m) for m in msgs[:len(rx_crcs)]]}
    finally:
        na.close()
        nb.close()


@pytest.mark.parametrize("mode", [Reliability.GBN, Reliability.SR])
@pytest.mark.parametrize("seed", range(12))
def test_engine_matches_python_state_machines(mode: Reliability, seed: int) -> None:
    res = _run(seed, mode)
    assert res["crc_ok"]


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
@pytest.mark.parametrize("seed", range(12))
def test_engine_matches_python_with_fec(seed: int) -> None:
    res = _run(seed, Reliability.FEC)
    assert res["crc_ok"]


@pytest.mark.parametrize("cc", ["hpcc-sender", "dcqcn"])
@pytest.mark.parametrize("seed", range(16))
def test_engine_cc_decides_as_the_python_reference(cc: str, seed: int) -> None:
    """HPCC per ACK (scripted INT echoes, MultiRate too) and DCQCN per CNP and timer:
    the same rate after every ACK, hence the same paced packets."""
    res = _run(seed, Reliability.SR, cc=cc, events=300)
    assert res["crc_ok"]


# -- mode auto: per-message plans, interleaved blocks, bursty loss ------------------------
class _Burst:
    """A Gilbert-Elliott drop pattern: bursts of ``burst`` packets on average (every
    packet of a burst lost), ``loss`` of all packets."""

    def __init__(self, rng: random.Random, loss: float, burst: float):
        self.rng, self.r = rng, 1 / burst
        self.p = loss * self.r / (1 - loss)
        self.bad = False

    def drop(self) -> bool:
        self.bad = (self.rng.random() >= self.r) if self.bad else (self.rng.random() < self.p)
        return self.bad


def _random_plan(rng: random.Random, n: int) -> recovery.MessagePlan:
    """Any plan the engine must execute: plain SR, a tail block, interleaved groups over
    the whole message or only part of it."""
    kind = rng.choice(["sr", "tail", "fec", "fec", "part"])
    m = rng.randint(1, 4)
    if kind == "sr":
        return recovery.MessagePlan(scheme="sr")
    if kind == "tail":
        t = min(n, rng.choice([1, 4, 8, 32]))
        return recovery.MessagePlan(scheme="tail", m=m, tail_pkts=t,
                                    groups=(recovery.Group(first=n - t, count=t, blocks=1, m=m),))
    k = rng.choice([1, 3, 8, 16, 128])
    depth = rng.choice([d for d in (1, 2, 4, 16) if k * d <= recovery.MAX_GROUP])
    first = rng.randint(0, n - 1) if kind == "part" else 0
    return recovery.MessagePlan(scheme="fec", k=k, m=m, depth=depth,
                                groups=recovery.plan_groups(n, k=k, m=m, depth=depth,
                                                            first=first))


def _run_auto(seed: int, *, native_req: bool = False, random_plans: bool = False,
              events: int = 3000) -> dict:
    """The Python requester in mode auto (its plans from a bursty path's model: SR, tail
    repairs, interleaved groups, split when window-blocked; or random plans) to the
    Python responder and the native one, fed the same packets: the same ACKs after
    every batch, the same counters at the end, every message delivered.  With
    ``native_req`` the native requester gets the same plans and must send the same
    packets (data, repairs in the interleaver's order, retransmissions) at the same
    times."""
    rng = random.Random(seed)
    mtu = rng.choice([64, 256])
    kw = {"mode": Reliability.AUTO, "mtu": mtu, "rate_bps": rng.choice([1e6, 1e7, 1e8]),
          "window_pkts": rng.choice([4, 16, 64, 256]), "rto_initial_s": 0.05}
    qa = QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, **kw)
    qb = QpConfig(qpn=QPN + 1, peer_qpn=QPN, peer_ip=A, **kw)
    start = rng.choice([0, 0xFFFFF0, 12345])
    loss, burst = rng.choice([(0.05, 3), (0.05, 10), (0.01, 3)])
    py_req = Requester(cfg=qa, local_ip=A, sport=SA, start_psn=start, now_s=0.0)
    py_req.set_path_loss(LossModel.gilbert_elliott(p=loss / burst / (1 - loss), r=1 / burst),
                         0.0)
    py_resp = Responder(cfg=qb, local_ip=B, sport=SB, start_psn=start)
    na, nb = StepEngine(A), StepEngine(B)
    na.add_qp(qa, requester=True, sport=SA, start_psn=start)
    nb.add_qp(qb, requester=False, sport=SB, start_psn=start)
    drops = _Burst(rng, loss, burst)
    choose = recovery.choose
    try:
        msgs = [rng.randbytes(mtu * rng.choice([1, 3, 10, 40, 120, 300]) - rng.randint(0, mtu - 1))
                for _ in range(rng.randint(3, 8))]
        posted = 0

        def post(t: float) -> None:
            nonlocal posted
            data = msgs[posted]
            posted += 1
            npk = -(-len(data) // mtu)
            view = py_req.path_view()
            assert view is not None
            plan = _random_plan(rng, npk) if random_plans else choose(view, npk, py_req.policy)
            recovery.choose = lambda *_a, **_k: plan  # what the Python requester decides
            try:
                msg = py_req.post_write(data, now=t)
            finally:
                recovery.choose = choose
            assert msg.extra["recovery"] == plan.as_dict(npk)
            na.clock(t)
            na.post_write(QPN, data, plan)

        for _ in range(rng.randint(1, len(msgs))):
            post(0.0)
        to_b: list[bytes] = []
        to_a: list[bytes] = []
        t = 0.0
        for _ in range(events):
            t += rng.choice([1e-5, 1e-4, 1e-3, 5e-3, 0.02])
            if posted < len(msgs) and rng.random() < 0.01:
                post(t)
            out: list[bytes] = []
            w_py = py_req.poll(t, out)
            if native_req:
                w_n = na.step(t)
                out_n = [p for _, _, _, p in na.output()]
                assert out_n == out, f"seed {seed} t={t}: sent packets differ"
                assert w_n == w_py, f"seed {seed} t={t}: next due {w_n} != {w_py}"
            to_b += [p for p in out if not drops.drop()]
            n = rng.randint(0, len(to_b))
            batch, to_b = to_b[:n], to_b[n:]
            ack_py = _both_responders_take(py_resp, nb, batch, t, seed)
            if ack_py and rng.random() >= 0.02:
                to_a.append(ack_py)
            if rng.random() < 0.7:
                for ack in to_a:
                    py_req.on_ack(roce.parse_udp_payload(ack), t)
                    if native_req:
                        na.inject(B, SB, ack, t)
                to_a = []
            if (posted == len(msgs) and py_req.idle
                    and py_resp.counters.msgs_done == len(msgs) and not to_b):
                break
        rx_crcs = [c for _, kind, _, c in nb.completions() if kind == 2]
        assert rx_crcs == [zlib.crc32(m) for m in msgs], f"seed {seed}: not all delivered"
        assert [m.crc32 for m in py_resp.messages] == rx_crcs
        assert nb.counters(QPN + 1) == py_resp.counters.as_dict()
        if native_req:
            assert na.counters(QPN) == py_req.counters.as_dict()
            assert bool(na.state(QPN).idle) == py_req.idle
            est = na.loss_estimate(QPN)
            le = py_req.loss_estimate
            assert (est.sent, est.lost, est.pairs) == (le.sent, le.lost, le.pairs)
        schemes = [m.extra["recovery"] for m in py_req.messages]
        return {"repaired": py_resp.counters.fec_repaired,
                "repairs": py_req.counters.repair_pkts,
                "retx": py_req.counters.retx_pkts,
                "interleaved": any(s["scheme"] == "fec" and s["depth"] > 1 for s in schemes)}
    finally:
        recovery.choose = choose
        na.close()
        nb.close()


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
def test_native_responder_decodes_interleaved_groups_as_python() -> None:
    """Issue 27: the native responder decodes mode auto's interleaved blocks (and tail
    blocks) as traffic/responder.py does, fec_repaired included, on bursty loss."""
    res = [_run_auto(seed) for seed in range(10)]
    assert any(r["interleaved"] for r in res)
    assert sum(r["repaired"] for r in res) > 0


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
@pytest.mark.parametrize("random_plans", [False, True], ids=["policy", "random"])
@pytest.mark.parametrize("seed", range(8))
def test_native_requester_executes_plans_as_python(seed: int, random_plans: bool) -> None:
    """Issue 27: the engine takes a plan per message (tn_post_write_plan) and sends it
    packet for packet as traffic/requester.py does: groups, tails, repairs in the
    interleaver's order, groups split when the window blocks, retransmissions."""
    _run_auto(seed, native_req=True, random_plans=random_plans)  # asserts as it runs


@pytest.mark.parametrize(("mode", "groups", "why"), [
    (Reliability.SR, [recovery.Group(0, 4, 1, 1)], "needs mode auto"),
    (Reliability.AUTO, [recovery.Group(2, 4, 1, 1)], "outside the message's 4 packets"),
    (Reliability.AUTO, [recovery.Group(0, 2, 1, 1), recovery.Group(1, 2, 1, 1)],
     "after the group before"),
    (Reliability.AUTO, [recovery.Group(0, 4, 17, 1)], "blocks 1..16"),
    (Reliability.AUTO, [recovery.Group(0, 4, 1, 17)], "m 0..16"),
])
def test_a_bad_plan_is_refused_with_its_reason(mode: Reliability, groups: list,
                                               why: str) -> None:
    eng = StepEngine(A)
    try:
        eng.add_qp(QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, mode=mode, mtu=64),
                   requester=True, sport=SA)
        plan = recovery.MessagePlan(scheme="fec", groups=tuple(groups))
        with pytest.raises(ConfigError, match=why):
            eng.post_write(QPN, bytes(256), plan)
    finally:
        eng.close()


def _post_with_plan(plan: recovery.MessagePlan, data: bytes):
    """A ``post`` for :func:`_lose_one_packet`: ``data`` as one message with ``plan`` on
    both requesters (the Python one's policy answers ``plan`` for it)."""
    choose = recovery.choose

    def post(py_req: Requester, na: StepEngine) -> None:
        try:
            recovery.choose = lambda *_a, **_k: plan
            py_req.post_write(data, now=0.0)
        finally:
            recovery.choose = choose
        na.post_write(QPN, data, plan)
    return post


def _lose_one_packet(kw: dict, post, *, lost_psn: int, start: int, burst: int = 1,
                     sent: list | None = None) -> tuple:
    """One message from a Python and a native requester to a Python and a native
    responder, 1 ms steps, ACKs delivered in the step they are sent; the first
    transmission of PSN ``lost_psn`` (and of the ``burst - 1`` after it) is lost.  Both
    sides must send the same packets every step (appended to ``sent`` as (PSN, opcode,
    first transmission?)); returns the Python requester and responder, the native
    counters of both."""
    qa = QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, **kw)
    qb = QpConfig(qpn=QPN + 1, peer_qpn=QPN, peer_ip=A, **kw)
    py_req = Requester(cfg=qa, local_ip=A, sport=SA, start_psn=start)
    py_resp = Responder(cfg=qb, local_ip=B, sport=SB, start_psn=start)
    na, nb = StepEngine(A), StepEngine(B)
    try:
        na.add_qp(qa, requester=True, sport=SA, start_psn=start)
        nb.add_qp(qb, requester=False, sport=SB, start_psn=start)
        post(py_req, na)
        t, dropped = 0.0, 0
        seen: set[int] = set()
        for _ in range(3000):
            t += 1e-3
            out: list[bytes] = []
            py_req.poll(t, out)
            na.step(t)
            assert [p for _, _, _, p in na.output()] == out, f"t={t}: sent packets differ"
            kept = []
            for p in out:
                bth = roce.parse_udp_payload(p).bth
                first = bth.opcode != roce.Opcode.FEC_REPAIR and bth.psn not in seen
                if first:
                    seen.add(bth.psn)
                if sent is not None:
                    sent.append((bth.psn, bth.opcode, first))
                if first and (bth.psn - lost_psn) & 0xFFFFFF < burst:
                    dropped += 1  # its first transmission
                else:
                    kept.append(p)
            ack = _both_responders_take(py_resp, nb, kept, t, 0)
            if ack:
                py_req.on_ack(roce.parse_udp_payload(ack), t)
                na.inject(B, SB, ack, t)
            if py_req.idle:
                break
        assert py_resp.counters.msgs_done == 1 and dropped
        return py_req, py_resp, na.counters(QPN), nb.counters(QPN + 1)
    finally:
        na.close()
        nb.close()


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
def test_a_loss_in_a_group_still_being_sent_waits_for_its_repairs() -> None:
    """A group's packet lost while the group is still being sent (a group longer than
    the round trip: SACKs arrive before its repairs go out) is not declared lost by
    the SACKs: its block's repairs are still to come, and they rebuild it.  Both
    requesters, the same packets."""
    start = 77
    kw = {"mode": Reliability.AUTO, "mtu": 256, "rate_bps": 1e6, "window_pkts": 256,
          "rto_initial_s": 2.0, "path_loss": LossModel.bernoulli(0.01)}
    plan = recovery.fixed_plan(64, k=8, m=2, depth=8)
    post = _post_with_plan(plan, bytes(range(256)) * 64)
    py_req, py_resp, nreq, nresp = _lose_one_packet(kw, post, lost_psn=start + 2, start=start)
    assert py_req.counters.retx_pkts == 0, "declared lost before its repairs were sent"
    assert py_resp.counters.fec_repaired == 1
    assert nreq == py_req.counters.as_dict()
    assert nresp == py_resp.counters.as_dict()


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
@pytest.mark.parametrize(("burst", "early"), [(16, False), (17, True)])
def test_a_block_that_lost_more_than_its_repairs_is_resent_at_once(burst: int,
                                                                   early: bool) -> None:
    """A group of 8 blocks with 2 repairs each, 256 packets (a group longer than the
    round trip: SACKs arrive while it is sent).  A burst of 16 lost packets costs each
    block 2, its repairs rebuild them: nothing is resent.  One more and a block has lost
    more than its repairs can rebuild: its losses are resent as soon as the ACKs show
    them, before the group's last data packet, not after the group and its repairs
    (the wait that made a long burst cost a message more than selective repeat; here,
    with nothing sent after the repairs to report them, it waited for two timeouts).
    Resent until what is missing fits the repairs: one packet.  Both requesters, the
    same packets."""
    start = 500
    kw = {"mode": Reliability.AUTO, "mtu": 256, "rate_bps": 1e6, "window_pkts": 512,
          "rto_initial_s": 5.0, "path_loss": LossModel.bernoulli(0.01)}
    plan = recovery.fixed_plan(256, k=32, m=2, depth=8)
    assert len(plan.groups) == 1 and plan.groups[0].blocks == 8
    post = _post_with_plan(plan, bytes(range(256)) * 256)
    sent: list[tuple[int, int, bool]] = []
    py_req, py_resp, nreq, nresp = _lose_one_packet(kw, post, lost_psn=start + 40,
                                                    start=start, burst=burst, sent=sent)
    c = py_req.counters
    assert c.timeouts == 0 and nreq == py_req.counters.as_dict()
    assert nresp == py_resp.counters.as_dict()
    order = [(psn, first) for psn, op, first in sent if op != roce.Opcode.FEC_REPAIR]
    last_data = max(i for i, (psn, first) in enumerate(order) if psn == start + 255 and first)
    resent = [i for i, (_, first) in enumerate(order) if not first]
    if early:
        assert resent and resent[0] < last_data, "waited for the rest of the group"
        assert c.retx_pkts == 1 and py_resp.counters.fec_repaired == burst - 1
    else:
        assert not resent and py_resp.counters.fec_repaired == burst


@pytest.mark.skipif(not engine_available() or not erasure_code_works(),
                    reason="the library's erasure code (ec.c) does not encode")
@pytest.mark.parametrize(("window", "repaired"), [(256, True), (4, False)],
                         ids=["block-open", "window-blocked"])
def test_mode_fec_waits_for_the_open_blocks_repairs(window: int, repaired: bool) -> None:
    """Mode fec: a packet of the block still being filled, lost while SACKs for later
    packets arrive (a block longer than the round trip), waits for the block's repairs
    and is rebuilt, not resent.  Window-blocked with less than half a block open the
    block would wait for the window, which the lost packet holds: then it is resent
    at once (no timeout).  Both requesters, the same packets."""
    start = 1000
    kw = {"mode": Reliability.FEC, "mtu": 256, "rate_bps": 1e6, "window_pkts": window,
          "rto_initial_s": 2.0, "fec_k": 16, "fec_m": 2}
    data = bytes(range(256)) * 48

    def post(py_req: Requester, na: StepEngine) -> None:
        py_req.post_write(data, now=0.0)
        na.post_write(QPN, data)

    py_req, py_resp, nreq, nresp = _lose_one_packet(kw, post, lost_psn=start + 2, start=start)
    c = py_req.counters
    assert c.timeouts == 0
    if repaired:
        assert c.retx_pkts == 0, "declared lost before its block's repairs were sent"
        assert py_resp.counters.fec_repaired == 1
    else:
        assert c.retx_pkts == 1 and py_resp.counters.fec_repaired == 0
    assert nreq == py_req.counters.as_dict()
    assert nresp == py_resp.counters.as_dict()


def _both_responders_take(py_resp, nb, batch: list[bytes], t: float, seed: int) -> bytes | None:
    """Deliver ``batch`` to the Python responder and the native one; their ACKs must be
    the same bytes.  Returns the Python responder's ACK (None: no ACK this step)."""
    for p in batch:
        py_resp.on_packet(roce.parse_udp_payload(p), t)
        nb.inject(A, SA, p, t)
    ack_py = py_resp.take_ack() if batch else None
    nb.step(t)
    ack_n = [p for _, _, _, p in nb.output()]
    assert ack_n == ([ack_py] if ack_py else []), f"seed {seed} t={t}: ACKs differ"
    return ack_py
