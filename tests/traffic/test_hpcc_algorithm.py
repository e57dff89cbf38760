"""traffic.cc.hpcc against hand-computed steps of HPCC's per-ACK update (ns-3 UpdateRateHp).

Every expected value below is worked out by hand from the formulas in the module
docstring; the arithmetic is written out so a reader can check it.  Common setup: a
2 Mbit/s QP, T = 10 ms (so W = 2e6 * 0.01 / 8 = 2500 B), eta 0.95, maxStage 5,
W_AI = 0.5 % of 2 Mbit/s = 10 kbit/s.
"""
from __future__ import annotations

import pytest

from formats.int_echo import EchoHop
from traffic.cc.hpcc import HpccSettings, HpccState
from traffic.errors import ConfigError

T = 0.01
R = 2e6
AI = 1e4


def hop(ts_us: int, tx: int, q: int, rate_mbps: int = 4, node: int = 1) -> EchoHop:
    return EchoHop(node, ts_us % (1 << 32), tx % (1 << 32), q, rate_mbps)


def state(**kw) -> HpccState:
    return HpccState(max_rate_bps=R, settings=HpccSettings(**{"w_ai_fraction": AI / R, **kw}))


def test_one_hop_full_fast_full():
    s = state()
    # ACK 1: records stored, nothing else; lastUpdateSeq = snd_nxt = 10
    assert not s.on_ack([hop(1000, 0, 0)], ack_seq=1, next_seq=10, base_rtt_s=T)
    assert s.rate_bps == R and s.last_update_seq == 10
    # ACK 2 (ack 11 > 10: per-RTT update).  tau = 2 ms, 1000 B -> 4 Mbit/s = B: u = 1.0
    # (queue term: min(2068, 0) = 0).  EWMA: (1.0 * 8 ms + 1.0 * 2 ms) / 10 ms = 1.0
    # max_c = 1 / 0.95 >= 1: R = Rc / max_c + W_AI = 2e6 * 0.95 + 1e4 = 1.91e6, stage 0
    assert s.on_ack([hop(3000, 1000, 2068)], ack_seq=11, next_seq=20, base_rtt_s=T)
    assert s.u == pytest.approx(1.0)
    assert s.rate_bps == pytest.approx(1.91e6) and s.ref_rate_bps == pytest.approx(1.91e6)
    assert s.inc_stage == 0 and s.last_update_seq == 20 and s.updates == 1
    # ACK 3 (ack 15 <= 20: fast react, nothing committed).  500 B in 2 ms = 2 Mbit/s:
    # 0.5 of B; queue term min(2068, 2068) * R / B / W = 2068 * 2e6 / 4e6 / 2500 = 0.4136
    # u_hop = 0.9136; EWMA = (1.0 * 0.008 + 0.9136 * 0.002) / 0.01 = 0.98272
    # max_c = 0.98272 / 0.95 = 1.034442..., R = 1.91e6 / 1.034442 + 1e4 = 1,856,406
    s.on_ack([hop(5000, 1500, 2068)], ack_seq=15, next_seq=25, base_rtt_s=T)
    assert s.u == pytest.approx(0.98272)
    assert s.rate_bps == pytest.approx(1.91e6 / (0.98272 / 0.95) + AI)
    assert s.rate_bps == pytest.approx(1_856_406, abs=1)
    assert s.ref_rate_bps == pytest.approx(1.91e6) and s.last_update_seq == 20
    assert s.fast_reacts == 1
    # ACK 4 (ack 21 > 20).  500 B / 2 ms: 0.5; queue min(0, 2068) = 0: u_hop = 0.5
    # EWMA = (0.98272 * 0.008 + 0.5 * 0.002) / 0.01 = 0.886176; max_c = 0.93282 < 1 and
    # stage 0 < 5: additive, R = Rc + W_AI = 1.92e6, stage 1
    s.on_ack([hop(7000, 2000, 0)], ack_seq=21, next_seq=30, base_rtt_s=T)
    assert s.u == pytest.approx(0.886176)
    assert s.rate_bps == pytest.approx(1.92e6) and s.inc_stage == 1
    assert s.last_update_seq == 30


def test_two_hops_the_most_loaded_hop_and_its_tau_drive_the_ewma():
    s = state()
    s.on_ack([hop(0, 0, 0, 4, 1), hop(0, 0, 0, 2, 2)], ack_seq=1, next_seq=5, base_rtt_s=T)
    # hop 1: 2 ms, 500 B -> 2 Mbit/s of 4: 0.5.   hop 2 (B = 2 Mbit/s): 4 ms, 900 B ->
    # 1.8 Mbit/s: 0.9, queue min(1250, 0)... stored q was 0, so queue term 0: u = 0.9
    # U = 0.9 with tau 4 ms: EWMA = (1.0 * 6 ms + 0.9 * 4 ms) / 10 ms = 0.96
    # max_c = 0.96 / 0.95 = 1.0105 >= 1: R = 2e6 / 1.0105263 + 1e4 = 1,989,166.7
    s.on_ack([hop(2000, 500, 0, 4, 1), hop(4000, 900, 1250, 2, 2)], ack_seq=6, next_seq=9,
             base_rtt_s=T)
    assert s.u == pytest.approx(0.96)
    assert s.rate_bps == pytest.approx(2e6 / (0.96 / 0.95) + AI)
    # next ACK: hop 2 has queue 1250 both times: 1250 * 2e6 / 2e6 / 2500 = 0.5 more.
    # hop 2: 2 ms, 250 B -> 1 Mbit/s: 0.5 + 0.5 = 1.0; hop 1 still 0.5: U = 1.0, tau 2 ms
    # EWMA = (0.96 * 8 + 1.0 * 2) / 10 = 0.968; max_c = 1.018947; Rc = 1,989,166.7
    rc = 2e6 / (0.96 / 0.95) + AI
    s.on_ack([hop(4000, 1000, 0, 4, 1), hop(6000, 1150, 1250, 2, 2)], ack_seq=10,
             next_seq=12, base_rtt_s=T)
    assert s.u == pytest.approx(0.968)
    assert s.rate_bps == pytest.approx(rc / (0.968 / 0.95) + AI)


def test_wraparound_of_timestamp_and_tx_bytes():
    s = state()
    s.on_ack([hop((1 << 32) - 500, (1 << 32) - 200, 0)], ack_seq=1, next_seq=10,
             base_rtt_s=T)
    # ts: 2^32 - 500 -> 1500 is 2000 us; tx: 2^32 - 200 -> 800 is 1000 B: as in the
    # one-hop test's ACK 2, u = 1.0 and R = 1.91e6
    s.on_ack([hop(1500, 800, 0)], ack_seq=11, next_seq=20, base_rtt_s=T)
    assert s.u == pytest.approx(1.0) and s.rate_bps == pytest.approx(1.91e6)


def test_a_hop_with_another_line_rate_is_normalised_by_its_own_rate():
    # the same 500 B per 2 ms (2 Mbit/s) is 0.2 of a 10 Mbit/s hop and 1.0 of a 2 Mbit/s
    # one; the slow hop decides: EWMA = (1 * 8 + 1.0 * 2) / 10 = 1.0 -> R = 1.91e6
    s = state()
    s.on_ack([hop(0, 0, 0, 10, 1), hop(0, 0, 0, 2, 2)], ack_seq=1, next_seq=10, base_rtt_s=T)
    s.on_ack([hop(2000, 500, 0, 10, 1), hop(2000, 500, 0, 2, 2)], ack_seq=11, next_seq=20,
             base_rtt_s=T)
    assert s.rate_bps == pytest.approx(1.91e6)
    # and the fast hop alone would let the flow grow: EWMA (1 * 8 + 0.2 * 2) / 10 = 0.84
    f = state()
    f.on_ack([hop(0, 0, 0, 10)], ack_seq=1, next_seq=10, base_rtt_s=T)
    f.on_ack([hop(2000, 500, 0, 10)], ack_seq=11, next_seq=20, base_rtt_s=T)
    assert f.u == pytest.approx(0.84)
    assert f.rate_bps == pytest.approx(R)  # Rc + W_AI, capped at the line rate


def test_multiplicative_increase_after_max_stage_and_tau_capped_at_t():
    s = state(max_stage=2)
    s.ref_rate_bps = s.rate_bps = 1e6
    s.on_ack([hop(0, 0, 0)], ack_seq=1, next_seq=2, base_rtt_s=T)
    seq, ts, tx = 2, 0, 0
    rates = []
    for _ in range(3):
        # tau 20 ms > T: capped, so the EWMA becomes this sample: 2500 B / 20 ms =
        # 1 Mbit/s = 0.25 of B
        ts += 20000
        tx += 2500
        seq += 1
        s.on_ack([hop(ts, tx, 0)], ack_seq=seq, next_seq=seq, base_rtt_s=T)
        assert s.u == pytest.approx(0.25)
        rates.append(s.rate_bps)
    # two additive steps (1e6 + 1e4, + 1e4), then stage 2 >= 2: Rc / (0.25 / 0.95) + W_AI
    assert rates[0] == pytest.approx(1.01e6) and rates[1] == pytest.approx(1.02e6)
    assert rates[2] == pytest.approx(min(R, 1.02e6 / (0.25 / 0.95) + AI))
    assert s.inc_stage == 0


def test_multi_rate_keeps_a_reference_rate_per_hop():
    s = state(multi_rate=True)
    s.on_ack([hop(0, 0, 0, 4, 1), hop(0, 0, 0, 2, 2)], ack_seq=1, next_seq=5, base_rtt_s=T)
    # hop 1: 2 ms, 1000 B = 4 Mbit/s: u 1.0, EWMA_1 = (1 * 8 + 1.0 * 2) / 10 = 1.0
    #   -> R_1 = 2e6 / (1 / 0.95) + 1e4 = 1.91e6
    # hop 2: 2 ms, 250 B = 1 Mbit/s of 2: 0.5, EWMA_2 = (1 * 8 + 0.5 * 2) / 10 = 0.9
    #   -> max_c 0.947 < 1, stage 0: R_2 = 2e6 + 1e4, bounded to 2e6, stage 1
    s.on_ack([hop(2000, 1000, 0, 4, 1), hop(2000, 250, 0, 2, 2)], ack_seq=6, next_seq=9,
             base_rtt_s=T)
    assert s.rate_bps == pytest.approx(1.91e6)
    assert s._hop_state[0].rc == pytest.approx(1.91e6) and s._hop_state[0].inc_stage == 0
    assert s._hop_state[1].rc == pytest.approx(2e6) and s._hop_state[1].inc_stage == 1


def test_unusable_records_and_path_changes_give_no_sample():
    s = state()
    s.on_ack([hop(1000, 0, 0)], ack_seq=1, next_seq=10, base_rtt_s=T)
    # the same record again (tau = 0) and a record without line rate: skipped
    assert not s.on_ack([hop(1000, 0, 0)], ack_seq=11, next_seq=20, base_rtt_s=T)
    assert not s.on_ack([hop(2000, 10, 0, 0)], ack_seq=12, next_seq=20, base_rtt_s=T)
    assert s.skipped_hops == 2 and s.rate_bps == R
    # another switch on the path: stored, not compared
    assert not s.on_ack([hop(3000, 500, 0, 4, node=9)], ack_seq=30, next_seq=40,
                        base_rtt_s=T)
    assert s.path_changes == 1 and s.rate_bps == R


def test_without_fast_react_only_per_rtt_acks_change_the_rate():
    s = state(fast_react=False)
    s.on_ack([hop(0, 0, 0)], ack_seq=1, next_seq=10, base_rtt_s=T)
    assert not s.on_ack([hop(2000, 1000, 0)], ack_seq=5, next_seq=10, base_rtt_s=T)
    assert s.on_ack([hop(4000, 2000, 0)], ack_seq=11, next_seq=20, base_rtt_s=T)


def test_with_the_sender_clock_the_reference_is_committed_at_most_once_per_t():
    """An ACK past lastUpdateSeq less than T after the last commit only fast-reacts."""
    def run(clock: bool) -> HpccState:
        s = state()
        s.ref_rate_bps = s.rate_bps = 1e6
        s.on_ack([hop(0, 0, 0)], ack_seq=1, next_seq=2, base_rtt_s=T,
                 now_s=0.0 if clock else None)
        # 2 ms later, ack 3 > 2.  1000 B in 2 ms = 4 Mbit/s: u = 1.0, EWMA 1.0,
        # max_c = 1 / 0.95: R = Rc / max_c + W_AI = 1e6 * 0.95 + 1e4 = 0.96e6
        s.on_ack([hop(2000, 1000, 0)], ack_seq=3, next_seq=4, base_rtt_s=T,
                 now_s=0.002 if clock else None)
        assert s.rate_bps == pytest.approx(0.96e6)
        return s
    ns3 = run(clock=False)   # the ACK clock alone: committed
    assert ns3.updates == 1 and ns3.ref_rate_bps == pytest.approx(0.96e6)
    s = run(clock=True)      # 2 ms < T since the first ACK: fast react only
    assert s.updates == 0 and s.fast_reacts == 1 and s.ref_rate_bps == 1e6
    assert s.last_update_seq == 2
    # at T: committed.  500 B in 2 ms = 2 Mbit/s: 0.5; EWMA = (1.0 * 8 + 0.5 * 2) / 10
    # = 0.9, max_c 0.947 < 1, stage 0: additive from Rc = 1e6: 1.01e6, stage 1
    s.on_ack([hop(4000, 1500, 0)], ack_seq=4, next_seq=6, base_rtt_s=T, now_s=0.010)
    assert s.u == pytest.approx(0.9)
    assert s.rate_bps == pytest.approx(1.01e6) and s.ref_rate_bps == pytest.approx(1.01e6)
    assert s.updates == 1 and s.inc_stage == 1 and s.last_update_seq == 6


@pytest.mark.parametrize("kw,msg", [({"eta": 0}, "eta"), ({"max_stage": -1}, "max_stage"),
                                    ({"w_ai_fraction": 2}, "w_ai_fraction"),
                                    ({"base_rtt_s": 0}, "base_rtt_s"),
                                    ({"pacing_burst_pkts": 0.5}, "pacing_burst_pkts")])
def test_bad_settings_are_named(kw, msg):
    with pytest.raises(ConfigError, match=msg):
        HpccSettings(**kw)


def test_multi_rate_idle_hop_is_the_line_rate_not_a_division_by_zero():
    # a hop that sent nothing and queued nothing: tau = 40 ms is capped at T = 30 ms, so
    # each sample sets the hop's EWMA to exactly 0; after maxStage additive steps the
    # multiplicative one is Rc / (0 / eta): its limit, the line rate
    s = HpccState(max_rate_bps=R, settings=HpccSettings(multi_rate=True))
    for k in range(7):
        s.on_ack([EchoHop(1, 40000 * k, 0, 0, 4)], ack_seq=k + 1, next_seq=k + 1,
                 base_rtt_s=0.03)
    assert s.rate_bps == R and s.ref_rate_bps == R and s.updates == 6
    assert s._hop_state[0].u == 0.0 and s._hop_state[0].inc_stage == 0  # the MI step ran
