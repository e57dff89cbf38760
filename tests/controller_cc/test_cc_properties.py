"""Property tests: modular deltas, one-flow-per-round batching."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.cc import delta_mod, delta_mod_n
from controller.cc.batch import occurrence_rounds


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
