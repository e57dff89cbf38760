"""HPCC engine: per-hop math, bottleneck choice, wraparound, convergence, draining."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import (
    FlowIndexError,
    FluidNetwork,
    FluidSim,
    HopSamples,
    HpccEngine,
    HpccParams,
    ParameterError,
    TelemetryError,
    hop_samples_from_records,
)

G = 1e9


def batch(*, flow, ts_ns, qlen, tx, rate=10 * G, node=None, arrival=0) -> HopSamples:
    ts = np.atleast_2d(np.asarray(ts_ns, dtype=np.uint64))
    n, h = ts.shape
    return HopSamples(
        flow_idx=np.atleast_1d(flow), n_hops=np.full(n, h), arrival_ns=np.full(n, arrival),
        node_id=np.tile(np.arange(1, h + 1), (n, 1)) if node is None else np.atleast_2d(node),
        ts_ns=ts, qlen_bytes=np.broadcast_to(np.atleast_2d(qlen), (n, h)),
        tx_bytes=np.broadcast_to(np.atleast_2d(np.asarray(tx, dtype=np.uint64)), (n, h)),
        line_rate_bps=np.broadcast_to(np.atleast_2d(rate), (n, h)).astype(float))


def engine(n=1, **kw) -> HpccEngine:
    p = HpccParams(**{"base_rtt_s": 10e-6, **kw})
    e = HpccEngine(n_flows=n, params=p, clock_ns=lambda: 0)
    e.start_flows(np.arange(n), max_rate_bps=10 * G)
    return e


def test_first_sample_only_primes_history():
    e = engine()
    d = e.update(batch(flow=0, ts_ns=[[1000]], qlen=0, tx=0))
    assert not d.updated[0]
    assert d.bottleneck_hop[0] == -1
    assert d.rate_bps[0] == 10 * G


def test_utilisation_matches_formula_and_rate_decreases():
    e = engine()
    T = 10e-6
    e.update(batch(flow=0, ts_ns=[[0]], qlen=20_000, tx=0, arrival=0))
    # 10 us later: 12_500 bytes sent = 10 Gbit/s, queue 25 kB (min with 20 kB -> 20 kB)
    d = e.update(batch(flow=0, ts_ns=[[10_000]], qlen=25_000, tx=12_500, arrival=10_000))
    u = 20_000 * 8 / (10 * G * T) + 1.0
    assert d.updated[0]
    assert d.utilisation[0] == pytest.approx(u)  # tau == T: EWMA takes the sample fully
    expected = 10 * G / (u / 0.95) + 10 * G * 0.001
    assert d.rate_bps[0] == pytest.approx(expected)
    assert e.state.rc_bps[0] == pytest.approx(expected)  # T elapsed: committed


def test_ewma_weight_is_sample_span():
    e = engine()
    e.update(batch(flow=0, ts_ns=[[0]], qlen=0, tx=0))
    # 2.5 us span at full line rate: u = 1, weight tau/T = 0.25
    d = e.update(batch(flow=0, ts_ns=[[2_500]], qlen=0, tx=3_125, arrival=2_500))
    assert d.utilisation[0] == pytest.approx(0.25)


def test_bottleneck_hop_drives_rate():
    e = engine()
    ts0, ts1 = [[0, 0, 0]], [[10_000, 10_000, 10_000]]
    e.update(batch(flow=0, ts_ns=ts0, qlen=[[0, 0, 0]], tx=[[0, 0, 0]]))
    # hop 0 at 40 %, hop 1 at 100 % of a 10G port plus queue, hop 2 idle
    d = e.update(batch(flow=0, ts_ns=ts1, qlen=[[0, 0, 0]], tx=[[5_000, 12_500, 0]],
                       arrival=10_000))
    assert d.bottleneck_hop[0] == 1
    assert d.utilisation[0] == pytest.approx(1.0)
    # a slower hop makes the same bytes a higher utilisation
    e2 = engine()
    e2.update(batch(flow=0, ts_ns=[[0, 0]], qlen=[[0, 0]], tx=[[0, 0]], rate=[[10 * G, 1 * G]]))
    d2 = e2.update(batch(flow=0, ts_ns=[[10_000, 10_000]], qlen=[[0, 0]], tx=[[1_250, 1_250]],
                         rate=[[10 * G, 1 * G]], arrival=10_000))
    assert d2.bottleneck_hop[0] == 1
    assert d2.utilisation[0] == pytest.approx(1.0)
    assert d2.rate_bps[0] < 10 * G


def test_wraparound_of_tx_bytes_and_timestamps():
    mod = (1 << 48) * 1000  # 48-bit microsecond timestamps in ns
    e = engine(ts_modulus_ns=mod)
    t0, b0 = mod - 4_000, (1 << 32) - 5_000
    e.update(batch(flow=0, ts_ns=[[t0]], qlen=0, tx=b0))
    d = e.update(batch(flow=0, ts_ns=[[6_000]], qlen=0, tx=7_500, arrival=10_000))
    # 10 us, 12_500 bytes across both wraps: exactly line rate
    assert d.utilisation[0] == pytest.approx(1.0)


def test_path_change_resets_hop_history():
    e = engine()
    e.update(batch(flow=0, ts_ns=[[0]], qlen=0, tx=0, node=[[7]]))
    d = e.update(batch(flow=0, ts_ns=[[10_000]], qlen=0, tx=12_500, node=[[8]], arrival=10_000))
    assert not d.updated[0]


def test_additive_increase_then_forced_multiplicative_step():
    e = engine(max_stage=2)
    t, tx = 0, 0
    e.update(batch(flow=0, ts_ns=[[t]], qlen=0, tx=tx))
    e.state.rc_bps[0] = e.state.rate_bps[0] = 5 * G
    rates, stages = [], []
    for k in range(1, 5):
        t += 10_000
        tx += 3_125  # 2.5 Gbit/s on a 10G port: u = 0.25 < eta
        d = e.update(batch(flow=0, ts_ns=[[t]], qlen=0, tx=tx, arrival=t))
        rates.append(d.rate_bps[0])
        stages.append(int(e.state.inc_stage[0]))
    rai = 10 * G * 0.001
    assert rates[0] == pytest.approx(5 * G + rai)
    assert rates[1] == pytest.approx(5 * G + 2 * rai)
    assert stages[:3] == [1, 2, 0]  # third round: stage hit max_stage -> MI
    assert rates[2] == pytest.approx(min((5 * G + 2 * rai) / (0.25 / 0.95) + rai, 10 * G))


def test_reference_rate_commits_once_per_rtt():
    e = engine()
    e.update(batch(flow=0, ts_ns=[[0]], qlen=0, tx=0, arrival=0))
    d1 = e.update(batch(flow=0, ts_ns=[[10_000]], qlen=50_000, tx=12_500, arrival=10_000))
    rc = e.state.rc_bps[0]
    assert rc == pytest.approx(d1.rate_bps[0])
    # several samples within the next RTT react from the same Rc and do not compound
    for k, t in enumerate((12_000, 14_000, 16_000)):
        d = e.update(batch(flow=0, ts_ns=[[t]], qlen=50_000, tx=12_500 + 2_500 * (k + 1),
                           arrival=t))
        assert e.state.rc_bps[0] == rc
        assert d.rate_bps[0] < rc
    d = e.update(batch(flow=0, ts_ns=[[21_000]], qlen=50_000, tx=25_000, arrival=21_000))
    assert e.state.rc_bps[0] == pytest.approx(d.rate_bps[0])


def test_duplicate_flows_in_one_batch_apply_in_order():
    e = engine(n=2)
    b = HopSamples(flow_idx=[0, 1, 0], n_hops=[1, 1, 1], arrival_ns=[0, 0, 10_000],
                   node_id=[[1], [1], [1]], ts_ns=[[0], [0], [10_000]],
                   qlen_bytes=[[0], [0], [0]], tx_bytes=[[0], [0], [12_500]],
                   line_rate_bps=[[10 * G]] * 3)
    d = e.update(b)
    assert list(d.updated) == [False, False, True]
    assert d.utilisation[2] == pytest.approx(1.0)


def test_rate_clamped_to_min_and_line_rate():
    e = engine(min_rate_fraction=0.01)
    e.update(batch(flow=0, ts_ns=[[0]], qlen=1e9, tx=0))
    d = e.update(batch(flow=0, ts_ns=[[10_000]], qlen=1e9, tx=12_500, arrival=10_000))
    assert d.rate_bps[0] == pytest.approx(0.01 * 10 * G)
    e2 = engine()
    e2.update(batch(flow=0, ts_ns=[[0]], qlen=0, tx=0))
    d2 = e2.update(batch(flow=0, ts_ns=[[10_000]], qlen=0, tx=0, arrival=10_000))
    assert d2.rate_bps[0] == 10 * G


def test_records_scatter_into_samples():
    s = hop_samples_from_records(
        row=[0, 0, 1], hop_idx=[0, 1, 0], flow_idx_per_row=[3, 4], arrival_ns_per_row=[5, 6],
        node_id=[1, 2, 1], ts_ns=[10, 11, 12], qlen_bytes=[0, 1, 2], tx_bytes=[7, 8, 9],
        line_rate_bps=[1e9, 1e9, 1e9])
    assert list(s.n_hops) == [2, 1]
    assert s.tx_bytes[0].tolist() == [7, 8]
    assert s.ts_ns[1, 0] == 12


def test_bad_input_names_field_and_value():
    with pytest.raises(ParameterError, match="eta = 1.5"):
        HpccParams(eta=1.5)
    e = engine()
    with pytest.raises(FlowIndexError, match="flow index 9 outside 0..0"):
        e.update(batch(flow=9, ts_ns=[[0]], qlen=0, tx=0))
    with pytest.raises(TelemetryError, match=r"line_rate_bps\[0, 0\]"):
        batch(flow=0, ts_ns=[[0]], qlen=0, tx=0, rate=0.0)
    with pytest.raises(TelemetryError, match="qlen_bytes"):
        HopSamples(flow_idx=[0], n_hops=[1], arrival_ns=[0], node_id=[[1]], ts_ns=[[0]],
                   qlen_bytes=[[0, 0]], tx_bytes=[[0]], line_rate_bps=[[1.0]])
    e2 = HpccEngine(n_flows=2)
    with pytest.raises(FlowIndexError, match="not started"):
        e2.update(batch(flow=1, ts_ns=[[0]], qlen=0, tx=0))


def run_sim(sim: FluidSim, e: HpccEngine, steps: int) -> tuple[np.ndarray, np.ndarray]:
    rates, queues = [], []
    for _ in range(steps):
        sim.step(e.state.rate_bps)
        e.update(sim.telemetry())
        rates.append(e.state.rate_bps.copy())
        queues.append(sim.queue_bytes.copy())
    return np.array(rates), np.array(queues)


def test_flows_converge_to_fair_share_through_wrapping_counters():
    B, N, T = 10 * G, 4, 20e-6
    net = FluidNetwork(link_rate_bps=[B], paths=[[0]] * N)
    mod = (1 << 48) * 1000
    sim = FluidSim(net=net, dt_s=T / 4, feedback_delay_s=T, ts_start_ns=mod - 10**6,
                   ts_modulus_ns=mod, tx_start_bytes=(1 << 32) - 10**6)
    e = HpccEngine(n_flows=N, params=HpccParams(base_rtt_s=T, rate_ai_fraction=0.005,
                                                ts_modulus_ns=mod), clock_ns=lambda: sim.now_ns)
    e.start_flows(np.arange(N), max_rate_bps=B, initial_rate_bps=[B, B / 2, B / 10, B / 100])
    rates, queues = run_sim(sim, e, 2000)
    final = rates[-200:].mean(axis=0)
    share = (0.95 + N * 0.005) * B / N
    assert np.all(np.abs(final - share) / share < 0.05), final / G
    assert queues[-200:].max() < 0.1 * B * T / 8  # near-zero standing queue
    s = e.latency.summary()["telemetry_to_decision"]
    assert s.count == 2000 * N and s.max_s == 0.0  # simulated clock: decided on arrival


def test_queue_drains_after_burst():
    B, N, T = 10 * G, 8, 20e-6
    net = FluidNetwork(link_rate_bps=[B], paths=[[0]] * N)
    sim = FluidSim(net=net, dt_s=T / 4, feedback_delay_s=T)
    sim.queue_bytes[:] = 20 * B * T / 8  # 20 BDP of backlog
    e = HpccEngine(n_flows=N, params=HpccParams(base_rtt_s=T), clock_ns=lambda: sim.now_ns)
    e.start_flows(np.arange(N), max_rate_bps=B)
    rates, queues = run_sim(sim, e, 800)
    assert queues[:, 0].max() > 20 * B * T / 8 * 0.99
    assert queues[-1, 0] < 0.05 * B * T / 8
    # while draining, the flows send clearly below the link rate
    drain = slice(20, int(np.argmax(queues[:, 0] < 1.0)))
    assert rates[drain].sum(axis=1).mean() < 0.9 * B


@pytest.mark.parametrize("per_hop", [False, True])
def test_two_hop_path_follows_slower_link(per_hop):
    # flow 0: link0 (10G) -> link1 (2G); flow 1: link0 only; link1 limits flow 0
    net = FluidNetwork(link_rate_bps=[10 * G, 2 * G], paths=[[0, 1], [0, -1]])
    T = 20e-6
    sim = FluidSim(net=net, dt_s=T / 4, feedback_delay_s=T)
    e = HpccEngine(n_flows=2, params=HpccParams(base_rtt_s=T, rate_ai_fraction=0.005,
                                                per_hop_rates=per_hop),
                   clock_ns=lambda: sim.now_ns)
    e.start_flows([0, 1], max_rate_bps=10 * G)
    rates, _ = run_sim(sim, e, 1500)
    final = rates[-200:].mean(axis=0)
    assert final[0] == pytest.approx(0.95 * 2 * G + 0.005 * 10 * G, rel=0.05)
    assert final[1] == pytest.approx(0.95 * 10 * G - final[0], rel=0.1)


def test_without_fast_react_rate_moves_once_per_rtt():
    e = engine(fast_react=False)
    e.update(batch(flow=0, ts_ns=[[0]], qlen=0, tx=0, arrival=0))
    d1 = e.update(batch(flow=0, ts_ns=[[10_000]], qlen=50_000, tx=12_500, arrival=10_000))
    d2 = e.update(batch(flow=0, ts_ns=[[12_000]], qlen=90_000, tx=15_000, arrival=12_000))
    assert d1.rate_bps[0] < 10 * G
    assert d2.rate_bps[0] == d1.rate_bps[0]  # inside the RTT: held


def test_fluid_model_rejects_bad_setup():
    with pytest.raises(ParameterError, match="positive rate"):
        FluidNetwork(link_rate_bps=[0.0], paths=[[0]])
    with pytest.raises(ParameterError, match=r"link index outside -1..0"):
        FluidNetwork(link_rate_bps=[1e9], paths=[[1]])
    with pytest.raises(ParameterError, match="at least one link"):
        FluidNetwork(link_rate_bps=[1e9], paths=[[-1]])
    net = FluidNetwork(link_rate_bps=[1e9], paths=[[0]])
    with pytest.raises(ParameterError, match="dt_s = 0"):
        FluidSim(net=net, dt_s=0, feedback_delay_s=0)
