"""Property tests: PSN gap accounting, event/sequence round trips, FEC monotonicity."""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.lossmap import (
    LinkModel,
    LossEvents,
    block_loss_pmf,
    cycles_from_events,
    cycles_from_sequence,
    psn_gaps,
    residual_loss,
)

PSN_MOD = 1 << 24


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, PSN_MOD - 1), n=st.integers(2, 400),
       drop=st.lists(st.booleans(), min_size=400, max_size=400), seed=st.integers(0, 2**16))
def test_psn_gaps_count_every_drop_once(start, n, drop, seed):
    """Drops between the first and last delivered packet are each counted once, even
    when retransmissions of dropped packets arrive later, in any batch order."""
    mask = np.array(drop[:n])
    mask[0] = mask[-1] = False
    psn = (start + np.arange(n)) % PSN_MOD
    sent = psn[~mask]
    resent = psn[mask]  # go-back / selective repeat: resend the dropped ones at the end
    all_psn = np.r_[sent, resent]
    ts = np.arange(all_psn.size)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(all_psn.size)  # record order in the batch does not matter
    g = psn_gaps(flow_idx=np.zeros(all_psn.size, int)[perm], ts_ns=ts[perm], psn=all_psn[perm])
    assert g.lost.sum() == mask.sum()
    if mask.any():
        firsts = psn[mask & ~np.r_[False, mask[:-1]]]
        assert sorted(g.first_lost_psn.tolist()) == sorted(firsts.tolist())


@settings(max_examples=60, deadline=None)
@given(lost=st.lists(st.booleans(), min_size=2, max_size=300),
       seq0=st.integers(0, (1 << 32) - 1))
def test_events_and_sequence_give_the_same_cycles(lost, seq0):
    x = np.array(lost + [False])  # the last packet arrives: every gap is reported
    seq = (seq0 + np.arange(x.size)) % (1 << 32)
    starts = np.flatnonzero(x & ~np.r_[False, x[:-1]])
    nxt = np.minimum.accumulate(np.where(~x, np.arange(x.size), x.size)[::-1])[::-1]
    ev = LossEvents(link_idx=np.zeros(starts.size, int), ts_ns=starts,
                    expected=seq[starts], received=seq[nxt[starts]])
    a, b = cycles_from_events(ev, 0), cycles_from_sequence(x)
    assert a.loss_len.tolist() == b.loss_len.tolist()
    assert a.gap_len[:-1].tolist() == b.gap_len[:-1].tolist()


@settings(max_examples=40, deadline=None)
@given(p=st.floats(0.001, 0.5), r=st.floats(0.05, 1.0), d=st.floats(0.05, 1.0),
       n=st.integers(2, 40))
def test_block_pmf_is_a_distribution_and_repair_helps(p, r, d, n):
    lm = LinkModel(p=p, r=r, loss_in_bad=d)
    pmf = block_loss_pmf([lm], n)
    assert abs(pmf.sum() - 1) < 1e-9 and (pmf >= -1e-15).all()
    # mean losses per block = n * stationary loss rate
    assert abs((pmf * np.arange(n + 1)).sum() - n * lm.loss_rate) < 1e-9
    res = [residual_loss(pmf, m) for m in range(n)]
    assert all(a >= b - 1e-15 for a, b in itertools.pairwise(res))
