"""The vectorised engine agrees with the scalar reference on random telemetry."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import HopSamples, HpccEngine, HpccParams
from controller.cc.hpcc_reference import FlowRef, reference_update


@pytest.mark.parametrize("per_hop", [False, True])
def test_engine_matches_scalar_reference(per_hop):
    rng = np.random.default_rng(3)
    F, H, rounds = 64, 4, 30
    params = HpccParams(base_rtt_s=8e-6, max_stage=3, ts_modulus_ns=(1 << 48) * 1000,
                        per_hop_rates=per_hop)
    eng = HpccEngine(n_flows=F, params=params, clock_ns=lambda: 0)
    line = rng.choice([10e9, 25e9, 100e9], size=(F, H))
    eng.start_flows(np.arange(F), max_rate_bps=line[:, 0], base_rtt_s=8e-6)
    refs = [FlowRef(max_rate_bps=line[f, 0], base_rtt_s=8e-6, rate_bps=line[f, 0],
                    rc_bps=line[f, 0]) for f in range(F)]
    n_hops = rng.integers(1, H + 1, size=F)
    ts = rng.integers(0, params.ts_modulus_ns, size=(F, H), dtype=np.uint64)
    tx = rng.integers(0, 1 << 32, size=(F, H), dtype=np.uint64)
    now = 0
    for k in range(rounds):
        step = rng.integers(1_000, 12_000, size=(F, 1)).astype(np.uint64)
        now += 5_000
        ts = (ts + step) % np.uint64(params.ts_modulus_ns)
        tx = (tx + (step.astype(float) * line / 8e9 * rng.uniform(0.2, 1.2, (F, H)))
              .astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        q = rng.uniform(0, 50_000, (F, H)) * (rng.random((F, H)) < 0.5)
        node = np.tile(np.arange(1, H + 1), (F, 1))
        node[rng.random((F, H)) < 0.03] += 100  # occasional route change
        rows = rng.permutation(F)[: F * 3 // 4]
        b = HopSamples(flow_idx=rows, n_hops=n_hops[rows], arrival_ns=np.full(rows.size, now),
                       node_id=node[rows], ts_ns=ts[rows], qlen_bytes=q[rows],
                       tx_bytes=tx[rows], line_rate_bps=line[rows])
        d = eng.update(b)
        for i, f in enumerate(rows):
            h = n_hops[f]
            rate, hop = reference_update(
                refs[f], params, arrival_ns=now, node=node[f, :h].tolist(),
                ts_ns=[int(x) for x in ts[f, :h]], qlen_bytes=q[f, :h].tolist(),
                tx_bytes=[int(x) for x in tx[f, :h]], line_rate_bps=line[f, :h].tolist())
            assert hop == d.bottleneck_hop[i], (k, f)
            np.testing.assert_allclose(d.rate_bps[i], rate, rtol=1e-9)
    np.testing.assert_allclose(eng.state.rc_bps, [r.rc_bps for r in refs], rtol=1e-9)
    if per_hop:
        np.testing.assert_allclose(eng.state.rc_hop[:, :H], [r.hop_rc[:H] for r in refs],
                                   rtol=1e-9)
    else:
        assert eng.state.inc_stage.tolist() == [r.inc_stage for r in refs]
