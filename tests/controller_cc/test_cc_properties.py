"""Property tests: modular deltas, one-flow-per-round batching."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from common.flow_batches import occurrence_rounds
from controller.cc import delta_mod, delta_mod_n


@settings(max_examples=200, deadline=None)
@given(old=st.integers(0, (1 << 32) - 1), step=st.integers(0, (1 << 32) - 1))
def test_delta_mod_recovers_any_forward_step(old, step):
    new = (old + step) % (1 << 32)
    assert int(delta_mod([new], [old], 32)[0]) == step


@settings(max_examples=200, deadline=None)
@given(mod=st.integers(2, 1 << 60), data=st.data())
def test_delta_mod_n_recovers_any_forward_step(mod, data):
    old = data.draw(st.integers(0, mod - 1))
    step = data.draw(st.integers(0, mod - 1))
    assert int(delta_mod_n([(old + step) % mod], [old], mod)[0]) == step


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 20), max_size=60))
def test_rounds_partition_rows_keep_order_and_hold_each_flow_once(flows):
    idx = np.array(flows, dtype=np.int64)
    rounds = occurrence_rounds(idx)
    seen = np.concatenate(rounds) if rounds else np.zeros(0, int)
    assert sorted(seen.tolist()) == list(range(idx.size))
    for r in rounds:
        assert np.unique(idx[r]).size == r.size
    # the k-th occurrence of a flow is in round k
    for f in set(flows):
        pos = [i for i, v in enumerate(flows) if v == f]
        assert [next(k for k, r in enumerate(rounds) if p in r) for p in pos] == \
            list(range(len(pos)))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), per_hop=st.booleans())
def test_rates_stay_finite_and_clamped_on_random_telemetry(data, per_hop):
    from controller.cc import HopSamples, HpccEngine, HpccParams
    F = 6
    eng = HpccEngine(n_flows=F, params=HpccParams(base_rtt_s=5e-6, per_hop_rates=per_hop,
                                                  ts_modulus_ns=1 << 40))
    eng.start_flows(np.arange(F), max_rate_bps=10e9)
    for _ in range(data.draw(st.integers(1, 8))):
        n = data.draw(st.integers(0, 10))
        H = data.draw(st.integers(1, 4))
        rows = st.lists(st.integers(0, F - 1), min_size=n, max_size=n)

        def grid(lo: int, hi: int, n: int = n, H: int = H) -> st.SearchStrategy:
            return st.lists(st.lists(st.integers(lo, hi), min_size=H, max_size=H),
                            min_size=n, max_size=n)

        b = HopSamples(
            flow_idx=np.array(data.draw(rows), dtype=np.int64),
            n_hops=np.array(data.draw(st.lists(st.integers(0, H), min_size=n, max_size=n)),
                            dtype=np.int64),
            arrival_ns=np.array(data.draw(st.lists(st.integers(0, 10**9), min_size=n,
                                                   max_size=n)), dtype=np.int64),
            node_id=np.array(data.draw(grid(1, 3)), dtype=np.uint32).reshape(n, H),
            ts_ns=np.array(data.draw(grid(0, (1 << 40) - 1)), dtype=np.uint64).reshape(n, H),
            qlen_bytes=np.array(data.draw(grid(0, 10**7)), dtype=float).reshape(n, H),
            tx_bytes=np.array(data.draw(grid(0, (1 << 32) - 1)), dtype=np.uint64).reshape(n, H),
            line_rate_bps=np.array(data.draw(grid(1, 10**11)), dtype=float).reshape(n, H))
        d = eng.update(b)
        assert np.all(np.isfinite(d.rate_bps))
        assert np.all((d.rate_bps >= 10e9 * 0.001 - 1e-3) & (d.rate_bps <= 10e9))
        assert np.all(np.isfinite(eng.state.rc_bps))
