"""FEC policy meets its target; PNG figures are written."""
from __future__ import annotations

from math import comb

import numpy as np
import pytest

from controller.lossmap import (
    LinkModel,
    LossEvents,
    LossParameterError,
    TimeBins,
    block_loss_pmf,
    choose_fec,
    cycles_from_sequence,
    fit_gilbert_elliott,
    link_loss_map,
    plot_bursts,
    plot_heatmap,
    residual_loss,
    simulate_block_residual,
    simulate_gilbert_elliott,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_bernoulli_block_pmf_is_binomial():
    q, n = 0.01, 20
    pmf = block_loss_pmf([LinkModel.bernoulli(q)], n)
    ref = np.array([comb(n, j) * q**j * (1 - q) ** (n - j) for j in range(n + 1)])
    np.testing.assert_allclose(pmf, ref, atol=1e-15)


def test_two_independent_links_compose():
    a, b = LinkModel.bernoulli(0.01), LinkModel.bernoulli(0.02)
    pmf = block_loss_pmf([a, b], 10)
    q = 1 - 0.99 * 0.98
    np.testing.assert_allclose(pmf, [comb(10, j) * q**j * (1 - q) ** (10 - j) for j in range(11)],
                               atol=1e-14)


def test_ge_pmf_matches_simulation():
    lm = LinkModel(p=0.005, r=0.2, loss_in_bad=0.6)
    n = 12
    pmf = block_loss_pmf([lm], n)
    x = simulate_gilbert_elliott(n=1_200_000, p=lm.p, r=lm.r, loss_in_bad=lm.loss_in_bad,
                                 seed=2)
    emp = np.bincount(x.reshape(-1, n).sum(axis=1), minlength=n + 1) / (x.size // n)
    np.testing.assert_allclose(emp[:4], pmf[:4], atol=3e-3)
    assert pmf.sum() == pytest.approx(1.0)


@pytest.mark.parametrize("target", [1e-3, 1e-4])
def test_policy_meets_target_in_model_and_on_a_trace(target):
    lm = LinkModel(p=0.005, r=0.2, loss_in_bad=0.6)
    pol = choose_fec([lm], target_residual=target)
    assert pol.k > 0 and not pol.retransmit
    assert pol.residual_loss <= target
    # one repair packet fewer would miss the target: the choice is minimal for its k
    assert residual_loss(block_loss_pmf([lm], pol.k + pol.m - 1), pol.m - 1) > target
    x = simulate_gilbert_elliott(n=2_000_000, p=lm.p, r=lm.r, loss_in_bad=lm.loss_in_bad,
                                 seed=4)
    assert simulate_block_residual(x, pol.k, pol.m) <= 2 * target


def test_policy_from_a_fitted_model():
    x = simulate_gilbert_elliott(n=500_000, p=0.01, r=0.4, loss_in_bad=0.9, seed=8)
    fit = fit_gilbert_elliott(cycles_from_sequence(x))
    lm = LinkModel(p=fit.p.value, r=fit.r.value, loss_in_bad=fit.loss_in_bad.value)
    pol = choose_fec([lm, LinkModel.bernoulli(0.001)], target_residual=1e-3)
    assert pol.residual_loss <= 1e-3
    assert pol.raw_loss == pytest.approx(x.mean() + 0.001, rel=0.1)


def test_clean_path_needs_no_fec_and_hopeless_path_flags_retransmission():
    assert choose_fec([LinkModel.bernoulli(1e-6)], target_residual=1e-4).k == 0
    assert choose_fec([], target_residual=1e-4).k == 0
    bad = choose_fec([LinkModel.bernoulli(0.5)], target_residual=1e-6, m_max=4)
    assert bad.retransmit and bad.m == 4
    with pytest.raises(LossParameterError, match="target_residual = 2"):
        choose_fec([], target_residual=2)
    with pytest.raises(LossParameterError, match="LinkModel.p = -1"):
        LinkModel(p=-1, r=0.5)


def test_png_files_written(tmp_path):
    bins = TimeBins(start_ns=0, bin_ns=1000, n_bins=5)
    ev = LossEvents(link_idx=[0, 0, 1, 2], ts_ns=[100, 2100, 3100, 4500],
                    expected=[5, 50, 7, 1], received=[8, 51, 17, 2])
    m = link_loss_map(bins=bins, n_links=3, events=ev)
    heat = plot_heatmap(m, tmp_path / "out" / "heat.png", link_names=["s1-s2", "s2-s3", "s3-h"])
    x = simulate_gilbert_elliott(n=100_000, p=0.01, r=0.3, loss_in_bad=0.9, seed=1)
    cy = cycles_from_sequence(x)
    burst = plot_bursts(cy, tmp_path / "burst.png", link_name="s1-s2",
                        fit=fit_gilbert_elliott(cy, resamples=50))
    for p in (heat, burst):
        data = p.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 5000
    empty = link_loss_map(bins=bins, n_links=2)
    assert plot_heatmap(empty, tmp_path / "empty.png").read_bytes()[:8] == PNG_MAGIC


def test_per_flow_fec_from_a_loss_map():
    from controller.cc import decode_feedback, encode_feedback
    from controller.lossmap import fit_link_models, path_fec
    from controller.lossmap.synth import make_trace
    paths = [[0, 2], [1, 2], [0, 3], [1, 3]]
    t = make_trace(paths=paths, n_links=4, link_ge={2: (0.005, 0.3, 0.9)},
                   packets_per_flow=40_000, seed=3)
    bins = TimeBins(start_ns=0, bin_ns=10**6, n_bins=int(t.host_ts.max() // 10**6) + 1)
    m = link_loss_map(bins=bins, n_links=4, counters=t.counters, events=t.events)
    models = fit_link_models(m, events=t.events)
    assert models[2].p == pytest.approx(0.005, rel=0.5) and models[0].loss_rate == 0
    fec = path_fec(paths=paths, models=models, target_residual=1e-4)
    assert fec.fec_k.tolist()[1] == fec.fec_k.tolist()[0] > 0
    assert fec.fec_k[2] == fec.fec_k[3] == 0
    assert np.all(fec.residual_loss <= 1e-4)
    rec = decode_feedback(encode_feedback(flow_id=np.arange(4), seq=0, decided_ns=0,
                                          rate_bps=1e9, fec_k=fec.fec_k, fec_m=fec.fec_m,
                                          flags=fec.retransmit.astype(int)))
    assert rec["fec_m"].tolist() == fec.fec_m.tolist()


def test_overhead_cap_trades_fec_for_retransmission():
    from controller.lossmap.fec import block_loss_pmfs
    lm = LinkModel(p=0.005, r=0.2, loss_in_bad=0.6)
    free = choose_fec([lm], target_residual=1e-4)
    capped = choose_fec([lm], target_residual=1e-4, max_overhead=0.5)
    assert free.overhead > 0.5 and not free.retransmit
    assert capped.overhead <= 0.5 and capped.retransmit
    assert capped.residual_loss < capped.raw_loss  # still the best code under the cap
    table = block_loss_pmfs([lm], 30)
    np.testing.assert_allclose(table[12, :13], block_loss_pmf([lm], 12))
    np.testing.assert_allclose(table.sum(axis=1), 1.0)


def test_flow_heatmap(tmp_path):
    from controller.lossmap import flow_loss_map
    bins = TimeBins(start_ns=0, bin_ns=100, n_bins=3)
    fm = flow_loss_map(bins=bins, n_flows=2, flow_idx=[0, 0, 0, 1], ts_ns=[10, 120, 250, 5],
                       psn=[0, 1, 5, 0])
    p = plot_heatmap(fm, tmp_path / "flows.png", link_names=["f0", "f1"], title="flows")
    assert p.read_bytes()[:4] == b"\x89PNG"
