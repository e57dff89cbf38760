"""Per-message recovery (traffic.recovery): the policy's choices, the interleaver's burst
tolerance and tail protection, on the real requester/responder state machines."""
from __future__ import annotations

import os
import zlib

import pytest

from common.loss import LossModel
from formats.roce import Opcode
from traffic import recovery
from traffic.errors import ConfigError
from traffic.qp_types import QpConfig, Reliability
from traffic.recovery import Group, PathView, block_members, choose, plan_groups, repair_order
from traffic.requester import Requester
from traffic.responder import Responder
from traffic.simlink import SimLink

B = LossModel.bernoulli
GE = LossModel.bursty


# -- the policy, table-driven -----------------------------------------------------------
@pytest.mark.parametrize(("loss", "rtt", "n", "scheme", "check"), [
    # a loss-free path: nothing to protect
    (LossModel.none(), 0.02, 256, "sr", None),
    # rare random loss: a light code, repair bytes within the overhead bound, yet a
    # round trip for fewer than one message in a thousand (long blocks: (128, 3)
    # costs 2.3 % and fails where (64, 1) at 1.6 % failed 0.8 % of messages)
    (B(0.001), 0.02, 256, "fec",
     lambda p: p.repair_pkts / 256 <= 0.03 and p.p_retx < 1e-3),
    # 1 % random: FEC, no interleaving needed for independent losses
    (B(0.01), 0.02, 256, "fec", lambda p: p.depth == 1),
    # 5 % random: a stronger code
    (B(0.05), 0.02, 256, "fec", lambda p: p.m >= 4),
    # bursts of 3: interleaved so a burst spreads over blocks
    (GE(0.01, 3), 0.02, 256, "fec", lambda p: p.depth >= 2),
    (GE(0.05, 10), 0.06, 256, "fec", lambda p: p.depth * p.m >= 10),
    # a small message on a lossy path: its tail is covered
    (B(0.01), 0.02, 16, "tail", lambda p: p.tail_pkts == 16),
    # long bursts on a 1 % path: repairs within the bound cannot cover them, SR it is
    (GE(0.01, 30), 0.02, 256, "sr", None),
    # long bursts on a 5 % path whose link the QP keeps busy: SR (a round trip of
    # packets has passed when a burst is resent, so a burst takes the resends only if
    # one starts among them; the codes that span a burst cost 25 % of the link, and
    # measured behind SR: 63-64 against 71-72 Mbit/s, presets README "Runs W-Y")
    (GE(0.05, 30), 0.02, 256, "sr", None),
    # 1 % random at 60 ms: coded, and the message needs no round trip at its p99
    (B(0.01), 0.06, 256, "fec", lambda p: p.p_retx < 0.01),
])
def test_policy_table(loss, rtt, n, scheme, check):
    plan = choose(PathView(loss=loss, rtt_s=rtt, rate_bps=100e6), n)
    assert plan.scheme == scheme, plan.reason
    assert plan.reason  # explained
    if check is not None:
        assert check(plan), plan
    if plan.scheme != "sr":
        assert plan.p_retx < recovery.plan_p_retx(loss, n, ())


def test_policy_follows_telemetry():
    """The same message gets another scheme when the reported loss changes."""
    view = PathView(loss=B(0.001), rtt_s=0.02, rate_bps=100e6)
    light = choose(view, 256)
    heavy = choose(PathView(loss=GE(0.05, 3), rtt_s=0.02, rate_bps=100e6), 256)
    assert (light.m, light.depth) != (heavy.m, heavy.depth)
    assert heavy.repair_pkts > light.repair_pkts


def test_policy_rejects_bad_input():
    with pytest.raises(ConfigError):
        choose(PathView(loss=B(0.01), rtt_s=0.02, rate_bps=1e8), 0)
    with pytest.raises(ConfigError):
        plan_groups(100, k=64, m=1, depth=16)  # group of 1024 > MAX_GROUP


def test_block_fail_matches_binomial():
    from math import comb
    p, n, m = 0.05, 36, 4
    exact = 1 - sum(comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(m + 1))
    assert recovery.block_fail(B(p), n, m) == pytest.approx(exact, rel=1e-9)
    # bursts hurt a contiguous block; spacing its symbols apart helps
    ge = GE(0.02, 8)
    assert recovery.block_fail(ge, 36, 4, 8) < recovery.block_fail(ge, 36, 4, 1)


# -- the interleaver ----------------------------------------------------------------------
@pytest.mark.parametrize(("n", "k", "m", "depth"), [(256, 32, 2, 8), (100, 16, 3, 4),
                                                       (64, 8, 1, 8), (37, 8, 2, 4)])
def test_layout_every_position_once_and_round_robin(n, k, m, depth):
    groups = plan_groups(n, k=k, m=m, depth=depth)
    seen = sorted(i for g in groups for j in range(g.blocks) for i in block_members(g, j))
    assert seen == list(range(n))
    for g in groups:
        assert all(len(block_members(g, j)) <= k for j in range(g.blocks))
        # stream position -> block is position mod blocks, data and repairs alike
        for t, (j, r) in enumerate(repair_order(g)):
            assert j == (g.count + t) % g.blocks and r == t // g.blocks


def _pair(mode, *, path_loss=None, window=1024, policy=None):
    req = Requester(cfg=QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", mode=mode,
                                 rate_bps=1e9, window_pkts=window, path_loss=path_loss),
                    local_ip="10.0.0.1", sport=1000)
    if policy is not None:
        req.policy = policy
    resp = Responder(cfg=QpConfig(qpn=2, peer_qpn=1, peer_ip="10.0.0.1", mode=mode,
                                  window_pkts=window),
                     local_ip="10.0.0.2", sport=2000)
    return req, resp


def _run(req, resp, msgs, drop, now=0.0):
    done0 = resp.counters.msgs_done
    for m in msgs:
        req.post_write(m, now=now)
    link = SimLink(req=req, resp=resp, delay_s=0.005, drop=drop, now=now)
    link.run(until=lambda: req.idle and resp.counters.msgs_done == done0 + len(msgs))
    assert [m.crc32 for m in resp.messages[done0:]] == [zlib.crc32(m) for m in msgs]
    return link


def _fixed(plan: recovery.MessagePlan) -> recovery.PolicyConfig:
    """A policy that can only choose ``plan``'s code (to test the mechanism)."""
    return recovery.PolicyConfig(k_choices=(plan.k,), depth_choices=(plan.depth,),
                                 m_max=plan.m, tail_choices=(), eps=1e-9,
                                 overhead_floor=1.0, max_overhead=1.0)


@pytest.mark.parametrize(("k", "m", "depth"), [(16, 1, 4), (16, 2, 4), (8, 2, 8)])
def test_every_burst_up_to_design_length_repaired(k, m, depth):
    """One group of depth x k packets plus its repairs: a burst of up to depth x m
    consecutive packets anywhere in that stream is repaired without a retransmission."""
    n = k * depth
    design = depth * m
    payload = os.urandom(n * 1024)
    loss = GE(0.05, 3)  # any lossy model: the policy below is pinned to (k, m, depth)
    for length in range(1, design + 1):
        for start in range(1, n + depth * m - length + 2):
            req, resp = _pair(Reliability.AUTO, path_loss=loss,
                              policy=_fixed(recovery.MessagePlan(scheme="fec", k=k, m=m,
                                                                 depth=depth)))
            lost = set(range(start, start + length))
            link = _run(req, resp, [payload], lambda i, b, lost=lost: i in lost)
            assert req.messages[0].extra["recovery"]["depth"] == depth
            assert link.data_dropped + link.repair_dropped == length
            assert req.counters.retx_pkts == 0, (length, start)


def test_burst_longer_than_design_falls_back_to_sr():
    k, m, depth = 16, 1, 4
    req, resp = _pair(Reliability.AUTO, path_loss=GE(0.05, 3),
                      policy=_fixed(recovery.MessagePlan(scheme="fec", k=k, m=m, depth=depth)))
    lost = set(range(3, 3 + 2 * depth * m - 1))  # three blocks lose 2, one loses 1
    _run(req, resp, [os.urandom(k * depth * 1024)], lambda i, b: i in lost)
    assert req.counters.retx_pkts > 0 and resp.counters.fec_repaired > 0


# -- tail protection ----------------------------------------------------------------------
def test_lost_tail_costs_no_round_trip():
    """SR loses the last packet: a timeout.  Auto (tail scheme) repairs it on arrival."""
    msg = os.urandom(16 * 1024)

    def last_data_once():
        hit = []

        def drop(i, b):
            if b[0] == Opcode.WRITE_LAST and not hit:
                hit.append(i)
                return True
            return False
        return drop

    req, resp = _pair(Reliability.SR)
    _run(req, resp, [msg], last_data_once())
    assert req.counters.timeouts == 1 and req.counters.retx_pkts == 1
    sr_fct = req.messages[0].fct_s

    req, resp = _pair(Reliability.AUTO, path_loss=B(0.01))
    _run(req, resp, [msg], last_data_once())
    rec = req.messages[0].extra["recovery"]
    assert rec["scheme"] == "tail" and rec["repair_pkts"] >= 1
    assert req.counters.retx_pkts == 0 and req.counters.timeouts == 0
    assert resp.counters.fec_repaired == 1
    assert req.messages[0].fct_s < sr_fct / 2
    # the extra bytes are counted, and bounded by the policy
    assert req.counters.repair_pkts == rec["repair_pkts"]
    cfg = req.policy
    assert rec["repair_pkts"] <= max(1, 16 * (cfg.overhead_floor + cfg.overhead_per_loss * 0.01))


def test_auto_without_telemetry_is_sr_then_learns_from_counters():
    req, resp = _pair(Reliability.AUTO)
    req.loss_estimate.min_pkts = 100
    msgs = [os.urandom(64 * 1024) for _ in range(4)]
    link = _run(req, resp, msgs, lambda i, b: i % 25 == 0 and b[0] != Opcode.FEC_REPAIR)
    assert req.messages[0].extra["recovery"]["scheme"] == "sr"
    assert "no loss telemetry" in req.messages[0].extra["recovery"]["reason"]
    more = [os.urandom(64 * 1024)]
    _run(req, resp, more, lambda i, b: False, now=link.now)
    rec = req.messages[-1].extra["recovery"]
    assert "own counters" in rec["reason"] and rec["scheme"] != "sr"


def test_auto_random_loss_delivers_and_repairs():
    req, resp = _pair(Reliability.AUTO, path_loss=B(0.02))
    msgs = [os.urandom(n * 1024 + 17) for n in (1, 7, 64, 200)]
    import random
    rng = random.Random(5)
    _run(req, resp, msgs, lambda i, b: rng.random() < 0.02)
    assert resp.counters.fec_repaired > 0
    assert {m.extra["recovery"]["scheme"] for m in req.messages} <= {"fec", "tail", "sr"}
    assert req.snapshot()["schemes"]


def test_window_blocked_group_is_split_and_still_repairs():
    req, resp = _pair(Reliability.AUTO, path_loss=GE(0.05, 3), window=40,
                      policy=_fixed(recovery.MessagePlan(scheme="fec", k=16, m=2, depth=4)))
    lost = {10, 11, 50, 51}
    _run(req, resp, [os.urandom(64 * 1024)], lambda i, b: i in lost)
    assert resp.counters.fec_repaired >= 2


def test_group_round_trip_of_plan_interface():
    g = Group(first=0, count=10, blocks=4, m=1)
    assert [list(block_members(g, j)) for j in range(4)] == [[0, 4, 8], [1, 5, 9], [2, 6], [3, 7]]
    assert g.repairs == 4


def test_sampled_failure_is_consistent_with_exact_block_probability():
    """One block on a bursty path: the sampled P(retx) of the message matches the exact
    recursion (the sampling is what plans of several blocks use)."""
    ge = GE(0.02, 8)
    g = (Group(first=0, count=32, blocks=1, m=4),)
    exact = recovery.block_fail(ge, 36, 4, 1)
    assert recovery.plan_p_retx(ge, 32, g) == pytest.approx(exact, abs=0.02)
    # and interleaving lowers it for the same repair bytes
    inter = plan_groups(128, k=32, m=4, depth=4)
    flat = plan_groups(128, k=32, m=4, depth=1)
    assert recovery.plan_p_retx(ge, 128, inter) < recovery.plan_p_retx(ge, 128, flat)


def test_penalty_counts_what_the_sender_can_see():
    """A failure the rest of the message reveals early costs less than one at its end,
    one only the next message can reveal waits for it, a resent packet lost again costs
    timeouts, and a message without failures costs nothing."""
    import numpy as np
    o = recovery.Outcome(stream=256, slack=np.array([200, 0, 0, 0, -1]),
                         resent=np.array([1, 1, 1, 40, 0]),
                         blind=np.array([False, False, True, True, False]))
    pen = o.penalty(rtt_s=0.02, t_pkt_s=88e-6, again=recovery.again_curve(B(0.0), None, 40),
                    rto_s=0.05, follow_s=0.01)
    assert pen[0] < pen[1] < pen[2]
    assert pen[1] == pytest.approx(0.02) and pen[2] == pytest.approx(0.03)
    assert pen[4] == 0.0
    lossy = o.penalty(rtt_s=0.02, t_pkt_s=88e-6, again=recovery.again_curve(B(0.05), None, 40),
                      rto_s=0.05, follow_s=0.01)
    assert lossy[3] - pen[3] == pytest.approx((1 - 0.95**40) * 2 * 0.05)


def test_resent_packets_are_lost_again_as_the_chain_says():
    """Independent loss: 1 - (1 - q)^r whatever the gap.  Bursts of 30 at 5 % on a busy
    link (a round trip of 227 packets since the loss): the back-to-back resends are
    lost together or not at all, far less often than independently.  No packets between
    (gap 0, a loss in the burst): the next one is lost with the burst's staying chance.
    Window-bound (gap None): the mean loss, independently (the policy's old estimate)."""
    r = [0, 1, 10, 30]
    flat = [1 - 0.95**x for x in r]
    for gap in (None, 0, 227):
        assert recovery.again_curve(B(0.05), gap, 30)[r] == pytest.approx(flat)
    ge = GE(0.05, 30)
    busy = recovery.again_curve(ge, 227, 30)
    assert busy[1] == pytest.approx(0.05, rel=0.05)
    assert 0.05 < busy[30] < 0.15 < flat[3]  # ~ 5 % + 30 / 600 starts of a burst
    assert recovery.again_curve(ge, 0, 30)[1] == pytest.approx(1 - 1 / 30)
    assert recovery.again_curve(ge, None, 30)[r] == pytest.approx(flat)
    assert recovery.resend_gap(PathView(loss=ge, rtt_s=0.02, rate_bps=100e6)) == 227
    assert recovery.resend_gap(PathView(loss=ge, rtt_s=0.06, rate_bps=100e6,
                                        window_bound=True)) is None
    assert recovery.resend_gap(PathView(loss=ge, rtt_s=0.05, rate_bps=100e6,
                                        rtt_measured=False)) is None


def test_before_the_first_rtt_sample_a_bursty_path_is_not_taken_for_a_busy_link():
    """At 5 % loss in bursts of 30 a QP with no RTT sample yet (the initial timeout in
    the RTT's place) codes its message, as a window-bound one does: nobody knows that
    its resends would find the burst over.  Once it has measured 20 ms and fills it,
    plain SR."""
    ge = GE(0.05, 30)
    first = recovery.make_view(ge, "controller", rtt_s=0.05, rate_bps=100e6, wire_pkt_bytes=1100,
                               rto_min_s=0.05, posted_pkts=256, rtt_measured=False)
    assert choose(first, 256).scheme == "fec"
    busy = recovery.make_view(ge, "controller", rtt_s=0.02, rate_bps=100e6, wire_pkt_bytes=1100,
                              rto_min_s=0.05, posted_pkts=512)
    assert not busy.window_bound and choose(busy, 256).scheme == "sr"


def test_failure_at_the_end_of_an_interleaved_group_is_blind():
    """An interleaved group covering the whole message: its repairs come last, so any
    failed block is revealed only by the next message; SR's losses mostly are not."""
    model = GE(0.05, 10)
    coded = recovery.outcome(model, 256, plan_groups(256, k=32, m=2, depth=8))
    plain = recovery.outcome(model, 256, ())
    failed = coded.slack >= 0
    assert failed.any() and coded.blind[failed].all()
    lost = plain.slack >= 0
    assert plain.blind[lost].mean() < 0.2


def test_warm_plans_cover_every_rtt_so_no_decision_runs_mid_transfer():
    """After warm_plans, a message posted at any smoothed RTT from 2 ms to 0.5 s takes
    its plan from the cache (a new decision costs milliseconds on the sender's loop)."""
    req, _resp = _pair(Reliability.AUTO, path_loss=GE(0.05, 10))
    req.warm_plans([256 * 1024])
    before = recovery._choose.cache_info().misses
    for srtt in (0.0021, 0.0213, 0.0231, 0.0287, 0.0337, 0.061, 0.0634, 0.31):
        req._srtt = srtt
        assert recovery.choose(req.path_view(), 256, req.policy).scheme == "fec"
    assert recovery._choose.cache_info().misses == before


def test_warm_plans_cover_rtts_at_half_the_timer_floor():
    """A timer floor of twice the path's RTT (the recovery sweep's) puts every smoothed
    RTT near the floor's half: a view on either side of it is one the warm-up decided
    (it was decided on the sender's loop, 28-50 ms late, for an RTT of 60.2 ms).  The
    native endpoint builds its view with the same recovery.view_rto."""
    req, _resp = _pair(Reliability.AUTO, path_loss=GE(0.01, 10))
    req.cfg.rto_min_s = 0.12
    req.warm_plans([256 * 1024])
    before = recovery._choose.cache_info().misses
    for srtt in (0.0525, 0.0598, 0.06, 0.0602, 0.0615, 0.066):
        req._srtt = srtt
        recovery.choose(req.path_view(), 256, req.policy)
    assert recovery._choose.cache_info().misses == before


# -- window-bound QPs: the link idles every round trip -------------------------------------
@pytest.mark.parametrize(("loss", "scheme", "check"), [
    # bursts of 30 at 1 %: a window-bound QP may spend the repairs a burst needs (a
    # link-bound one stays within 17 % and sends plain SR: the table above)
    (GE(0.01, 30), "fec", lambda p: p.depth * p.m >= 30 and p.p_retx < 0.02),
    # bursts of 10 at 5 %: a stronger code than the link-bound cap allows
    (GE(0.05, 10), "fec", lambda p: p.repair_pkts > 64 and p.p_retx < 0.01),
    # bursts of 30 at 5 %: interleaved deep enough that a burst costs each block few
    # symbols (SR's resends meet the packet-counted burst again where the link idles)
    (GE(0.05, 30), "fec", lambda p: p.depth * p.m >= 30),
    # rare random loss: the repair bytes stay in proportion to the loss all the same
    (B(0.001), "fec", lambda p: p.repair_pkts / 256 <= 0.03),
])
def test_window_bound_policy_table(loss, scheme, check):
    plan = choose(PathView(loss=loss, rtt_s=0.06, rate_bps=100e6, window_bound=True), 256)
    assert plan.scheme == scheme, plan.reason
    assert "window-bound" in plan.reason
    assert check(plan), plan


def test_the_repair_cap_grows_with_the_burst_only_when_window_bound():
    cfg = recovery.PolicyConfig()
    for loss in (B(0.001), B(0.01), GE(0.01, 3)):  # bursts of up to burst_pkts: as before
        assert recovery.repair_cap(loss, cfg, True) == recovery.repair_cap(loss, cfg, False)
    assert recovery.repair_cap(GE(0.01, 30), cfg, False) == pytest.approx(0.17)
    assert recovery.repair_cap(GE(0.01, 30), cfg, True) == cfg.max_overhead_idle
    assert recovery.repair_cap(GE(0.01, 10), cfg, True) == pytest.approx(0.33)


@pytest.mark.parametrize(("srtt", "in_flight", "bound"), [
    (0.06, 1, True),    # 2 x 256 packets of 1 KiB: 45 ms of 100 Mbit/s, < 60 ms
    (0.002, 0, False),  # one message alone is 22 ms of wire, > a 2 ms round trip
    (0.06, 3, False),   # 4 messages: 90 ms of wire, > the round trip
    (None, 0, False),   # no round trip measured yet: the initial timeout is no RTT
])
def test_requester_says_whether_what_it_posted_fills_the_round_trip(srtt, in_flight, bound):
    """The Python requester's view counts its posted, unacknowledged packets, the message
    being planned included (the native endpoint counts the same from the engine's
    state), against rate x RTT."""
    req, _resp = _pair(Reliability.AUTO, path_loss=GE(0.01, 30))
    req.cfg.rate_bps = 100e6
    req._srtt = srtt
    for _ in range(in_flight + 1):
        msg = req.post_write(bytes(256 * 1024), now=0.0)
    assert ("window-bound" in msg.extra["recovery"]["reason"]) is bound


def test_predictions_lay_out_what_the_policy_weighs():
    """Every candidate with its cost and predicted FCT, cheapest first, the plan
    `choose` takes marked once; SR is among them; a wider cap shows more plans; a
    loss-free path or a bad cap is refused with its reason."""
    view = PathView(loss=GE(0.01, 10), rtt_s=0.02, rate_bps=100e6)
    preds = recovery.predictions(view, 256)
    assert [p.cost_s for p in preds] == sorted(p.cost_s for p in preds)
    (chosen,) = [p for p in preds if p.chosen]
    picked = choose(view, 256)
    assert (chosen.plan.scheme, chosen.plan.k, chosen.plan.m, chosen.plan.depth) == (
        picked.scheme, picked.k, picked.m, picked.depth)
    assert chosen.plan.label == picked.label == f"fec({picked.k},{picked.m})x{picked.depth}"
    assert recovery.plan_label("tail", m=2, tail_pkts=16) == "tail(16,2)"
    sr = next(p for p in preds if p.plan.scheme == "sr")
    assert sr.plan.label == "sr"
    # SR's p99 carries a round trip, its mean little: a code that removes the round
    # trip costs wire time on every message
    assert sr.p99_fct_s > sr.mean_fct_s + 0.5 * view.rtt_s
    assert chosen.p99_fct_s < 0.8 * sr.p99_fct_s and chosen.mean_fct_s > sr.mean_fct_s
    assert len(recovery.predictions(view, 256, cap=0.4)) > len(preds)
    with pytest.raises(ConfigError, match="loss-free"):
        recovery.predictions(PathView(loss=LossModel.none(), rtt_s=0.02, rate_bps=1e8), 256)
    with pytest.raises(ConfigError, match="repair cap 2"):
        recovery.predictions(view, 256, cap=2)


def test_plans_command_prints_the_candidates(capsys):
    """`python -m traffic plans`: the path as the policy sees it, the cheapest plans
    with SR and the choice, and how many plans reach p99 <= 0.8 x SR at SR's mean."""
    import signal

    from traffic.cli import main
    handlers = [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)]
    assert main(["plans", "--path-loss", "ge:1%/10", "--rtt", "20ms", "-s", "256K",
                 "--inflight", "2", "--top", "3"]) == 0
    # the command's own SIGTERM/SIGINT handler is gone again: this process's forked
    # copies (pyroute2's namespace helpers) must not inherit it
    assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == handlers
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("path: 1.00% loss, mean burst 10.0 packets")
    assert "256 packets of 1024 B" in out[0] and "repair cap 16.8%" in out[0]
    rows = [ln for ln in out[2:] if "%)" in ln]
    assert len(rows) == 4 and any(r.split()[0] == "sr" for r in rows)   # 3 cheapest + SR
    assert sum(r.startswith(" *") for r in rows) == 1
    assert out[-1].endswith("at a mean FCT no higher than SR's: 0 of 142")
    assert main(["plans", "--path-loss", "0"]) == 1
    assert "loss-free path" in capsys.readouterr().err
