"""DCQCN baseline: alpha, decrease, increase stages, CNP pacing, fluid convergence."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import (
    CnpGenerator,
    DcqcnEngine,
    DcqcnFlowIndexError,
    DcqcnParameterError,
    DcqcnParams,
    FluidNetwork,
    FluidSim,
)

G = 1e9
US = 1000


def started(n=1, **kw) -> DcqcnEngine:
    e = DcqcnEngine(n_flows=n, params=DcqcnParams(**kw))
    e.start_flows(np.arange(n), max_rate_bps=10 * G, now_ns=0)
    return e


def test_cnp_cuts_rate_by_half_alpha_then_raises_alpha():
    e = started()
    e.on_cnp([0], 1 * US)
    assert e.rate_bps[0] == pytest.approx(5 * G)  # alpha 1 -> (1 - 1/2)
    assert e.target_bps[0] == 10 * G
    assert e.alpha[0] == pytest.approx(1.0)  # (1-g)*1 + g
    e.alpha[0] = 0.5
    e.on_cnp([0], 10 * US)
    assert e.rate_bps[0] == pytest.approx(5 * G * 0.75)
    assert e.alpha[0] == pytest.approx((1 - 1 / 256) * 0.5 + 1 / 256)


def test_decrease_at_most_once_per_interval():
    e = started(decrease_interval_s=50e-6)
    e.on_cnp([0, 0], 1 * US)
    e.on_cnp([0], 20 * US)
    assert e.decreases == 1
    assert e.cnps_seen == 3
    e.on_cnp([0], 52 * US)
    assert e.decreases == 2


def test_alpha_decays_per_timer_without_cnp():
    e = started()
    e.advance(55 * US * 3)
    assert e.alpha[0] == pytest.approx((1 - 1 / 256) ** 3)
    e.advance(55 * US * 3 + 10)
    assert e.alpha[0] == pytest.approx((1 - 1 / 256) ** 3)


def test_fast_recovery_then_additive_then_hyper_increase():
    e = started(byte_counter_bytes=1 << 40)  # timer-driven only
    e.on_cnp([0], 0)
    rc0, rt = e.rate_bps[0], e.target_bps[0]
    e.advance(55 * US)
    assert e.rate_bps[0] == pytest.approx((rc0 + rt) / 2)  # fast recovery: Rt unchanged
    assert e.target_bps[0] == rt
    e.advance(55 * US * 4)  # stages 2..4: still fast recovery
    assert e.target_bps[0] == rt
    assert e.timer_stage[0] == 4
    e.target_bps[0] = 5 * G
    e.advance(55 * US * 5)  # stage 5: one counter reached F -> additive increase
    assert e.target_bps[0] == pytest.approx(5 * G + 0.001 * 10 * G)
    # both counters past F -> hyper increase by (min stage - F) * R_HAI
    e.byte_stage[0] = 7
    e.target_bps[0] = 5 * G
    e.advance(55 * US * 6)  # timer stage 6, byte stage 7: i = 1
    assert e.target_bps[0] == pytest.approx(5 * G + 0.01 * 10 * G)


def test_byte_counter_drives_increase_events():
    e = started(byte_counter_bytes=1000, timer_s=1.0)
    e.on_cnp([0], 0)
    e.on_sent([0, 0], [1500, 1600])  # 3100 bytes: 3 events, 100 left
    assert e.byte_stage[0] == 3
    assert e.byte_count[0] == 100


def test_cnp_generator_paces_per_flow():
    g = CnpGenerator(n_flows=2, cnp_interval_s=50e-6)
    f, t = g.on_marked([0, 0, 1, 0], [0, 10 * US, 20 * US, 60 * US])
    assert f.tolist() == [0, 1, 0]
    assert t.tolist() == [0, 20 * US, 60 * US]


def test_errors_name_the_value():
    with pytest.raises(DcqcnParameterError, match="g = 2"):
        DcqcnParams(g=2)
    e = started()
    with pytest.raises(DcqcnFlowIndexError, match="flow index 5"):
        e.on_cnp([5], 0)


def test_fluid_flows_share_bottleneck():
    B, N, dt = 10 * G, 4, 2e-6
    sim = FluidSim(net=FluidNetwork(link_rate_bps=[B], paths=[[0]] * N), dt_s=dt,
                   feedback_delay_s=10e-6)
    e = DcqcnEngine(n_flows=N, params=DcqcnParams(byte_counter_bytes=1 << 20,
                                                  rate_ai_fraction=0.004,
                                                  rate_hai_fraction=0.02))
    e.start_flows(np.arange(N), max_rate_bps=B, now_ns=0)
    e.rate_bps[:] = [B, B / 2, B / 10, B / 100]
    npg = CnpGenerator(n_flows=N)
    rng = np.random.default_rng(7)
    hist = []
    for _ in range(25_000):
        rate = e.rate_bps.copy()
        sim.step(rate)
        e.advance(sim.now_ns)
        marked = sim.ecn_marks(rate, kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01,
                               mtu_bytes=1000, rng=rng)
        f, _ = npg.on_marked(np.flatnonzero(marked), sim.now_ns)
        e.on_cnp(f, sim.now_ns)
        e.on_sent(np.arange(N), (rate * dt / 8).astype(np.int64))
        hist.append(rate)
    mean = np.array(hist[-10_000:]).mean(axis=0)
    assert np.all(np.abs(mean - B / N) / (B / N) < 0.3), mean / G
    assert mean.sum() == pytest.approx(B, rel=0.1)
    assert e.cnps_seen > 0


def test_long_idle_period_is_cheap_and_recovers_fully():
    e = started(byte_counter_bytes=1 << 40)
    e.on_cnp([0], 0)
    e.advance(10**9)  # one second: about 18,000 timer events
    assert e.timer_stage[0] == 10**9 // (55 * US)
    assert e.rate_bps[0] == pytest.approx(10 * G)
