"""Recorded telemetry replayed through HPCC against recorded rates (golden file).

``data/hpcc_trace.npz`` holds per-hop telemetry as the collector hands it over
(3 flows, 2 hops, 48-bit microsecond timestamps wrapping, tx bytes wrapping,
queue build-up and drain) and the rates the engine decided when it was
recorded. A change in HPCC arithmetic shows up here as a diff. Regenerate on
purpose with ``UPDATE_GOLDEN=1``.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from controller.cc import (
    V1MODEL_TS_MODULUS_NS,
    FluidNetwork,
    FluidSim,
    HopSamples,
    HpccEngine,
    HpccParams,
)

GOLDEN = Path(__file__).parent / "data" / "hpcc_trace.npz"
PARAMS = HpccParams(base_rtt_s=20e-6, rate_ai_fraction=0.002, ts_modulus_ns=V1MODEL_TS_MODULUS_NS)
FIELDS = ("flow_idx", "n_hops", "arrival_ns", "node_id", "ts_ns", "qlen_bytes", "tx_bytes",
          "line_rate_bps")


def record() -> dict[str, np.ndarray]:
    net = FluidNetwork(link_rate_bps=[40e9, 10e9], paths=[[0, 1], [0, 1], [0, -1]])
    sim = FluidSim(net=net, dt_s=5e-6, feedback_delay_s=20e-6,
                   ts_start_ns=V1MODEL_TS_MODULUS_NS - 400_000,
                   ts_modulus_ns=V1MODEL_TS_MODULUS_NS, tx_start_bytes=(1 << 32) - 300_000)
    sim.queue_bytes[1] = 150_000
    eng = HpccEngine(n_flows=3, params=PARAMS, clock_ns=lambda: 0)
    eng.start_flows(np.arange(3), max_rate_bps=40e9, initial_rate_bps=[40e9, 20e9, 5e9])
    rows: dict[str, list[np.ndarray]] = {k: [] for k in FIELDS}
    rates = []
    for _ in range(240):
        sim.step(eng.state.rate_bps)
        t = sim.telemetry()
        t.ts_ns = (t.ts_ns // 1000) * 1000  # microsecond resolution, as switches report
        for k in FIELDS:
            rows[k].append(getattr(t, k))
        rates.append(eng.update(t).rate_bps)
    out = {k: np.stack(v) for k, v in rows.items()}
    out["rate_bps"] = np.stack(rates)
    return out


def replay(trace: dict[str, np.ndarray]) -> np.ndarray:
    eng = HpccEngine(n_flows=3, params=PARAMS, clock_ns=lambda: 0)
    eng.start_flows(np.arange(3), max_rate_bps=40e9, initial_rate_bps=[40e9, 20e9, 5e9])
    out = []
    for i in range(trace["flow_idx"].shape[0]):
        b = HopSamples(**{k: trace[k][i] for k in FIELDS})
        out.append(eng.update(b).rate_bps)
    return np.stack(out)


def test_replay_matches_recorded_rates():
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.parent.mkdir(exist_ok=True)
        np.savez_compressed(GOLDEN, **record())
    assert GOLDEN.exists(), f"{GOLDEN.name} missing: run once with UPDATE_GOLDEN=1"
    with np.load(GOLDEN) as z:
        trace = {k: z[k] for k in z.files}
    rates = replay(trace)
    np.testing.assert_allclose(rates, trace["rate_bps"], rtol=1e-9)
    # what the trace shows: the queue on the 10G hop pulls both flows through it down,
    # then they settle near their share while the third flow keeps most of the 40G link
    final = rates[-40:].mean(axis=0)
    assert final[0] + final[1] < 10e9 * 1.05
    assert final[2] > 25e9
