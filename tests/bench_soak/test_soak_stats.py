"""The soak's verdict rules: memory slopes, drops by kind, export comparison, report."""
import numpy as np
import pytest

from bench.soak_procs import ProcSample
from bench.soak_report import format_report, memory_table, report_dict
from bench.soak_stats import (
    MAX_SLOPE_MB_PER_MIN,
    MIN_WINDOW_S,
    SoakStatsError,
    classify_drops,
    compare_export,
    memory_rows,
    slope_mb_per_min,
)


def test_slope_of_a_line_is_exact_in_mb_per_min():
    t = np.arange(0, 600, 5.0)
    rss = 100e6 + t * (2e6 / 60)            # 2 MB/min
    assert slope_mb_per_min(t, rss) == pytest.approx(2.0)
    assert slope_mb_per_min(t, np.full_like(t, 50e6)) == pytest.approx(0.0)


def test_slope_ignores_noise_around_a_flat_line():
    rng = np.random.default_rng(1)
    t = np.arange(0, 600, 5.0)
    rss = 80e6 + rng.normal(0, 0.5e6, t.size)   # +-0.5 MB jitter, no trend
    assert abs(slope_mb_per_min(t, rss)) < 0.2


def test_slope_degenerate_inputs():
    assert slope_mb_per_min([], []) == 0.0
    assert slope_mb_per_min([3.0], [1e6]) == 0.0
    assert slope_mb_per_min([3.0, 3.0], [1e6, 2e6]) == 0.0
    with pytest.raises(SoakStatsError, match="3 times but 2 RSS"):
        slope_mb_per_min([1, 2, 3], [1, 2])


def _series(slope_mb_min, *, t_end=600.0, start_mb=100.0, step=5.0):
    t = np.arange(0, t_end + step, step)
    return t, (start_mb + slope_mb_min * t / 60) * 1e6, np.full(t.size, 10.0)


def test_memory_verdicts_flat_growing_short_and_exempt():
    series = {("switch", "s1 10"): _series(0.0), ("switch", "s2 11"): _series(0.2),
              ("controller", "controller 12"): _series(3.0),
              ("influxd", "influxd 13"): _series(20.0)}
    rows = {r.kind: r for r in memory_rows(series, warmup_s=60)}
    assert rows["switch"].verdict == "flat" and rows["switch"].processes == 2
    assert rows["switch"].worst == "s2 11"
    assert rows["switch"].slope_mb_per_min == pytest.approx(0.2)
    assert rows["controller"].verdict == "growing" and rows["controller"].failed
    assert rows["influxd"].verdict == "not judged" and not rows["influxd"].failed
    # start is the first sample after the warm-up, end the last one
    assert rows["controller"].start_mb == pytest.approx(103.0)
    assert rows["controller"].end_mb == pytest.approx(130.0)
    short = memory_rows({("agent", "h1 5"): _series(5.0, t_end=60)}, warmup_s=10)
    assert short[0].verdict == "too short" and MIN_WINDOW_S > 50


def test_memory_warmup_growth_is_not_a_leak():
    t = np.arange(0, 600, 5.0)
    rss = np.where(t < 60, 50e6 + t * 1e6, 110e6)      # grows during start-up only
    rows = memory_rows({("controller", "c 1"): (t, rss, np.zeros(t.size))}, warmup_s=60)
    assert rows[0].verdict == "flat"
    rows = memory_rows({("controller", "c 1"): (t, rss, np.zeros(t.size))}, warmup_s=0)
    assert rows[0].verdict == "growing"


def test_memory_rows_skip_processes_with_too_few_samples_and_check_lengths():
    t = np.array([100.0, 105.0])
    assert memory_rows({("traffic", "h1 3"): (t, t * 1e6, t)}, warmup_s=0) == []
    with pytest.raises(SoakStatsError, match="traffic h1 3: 2 times, 1 RSS"):
        memory_rows({("traffic", "h1 3"): (t, t[:1], t)}, warmup_s=0)


def _switch(**port):
    return {"name": "s1", "pipeline_drops": 0, "tm_errors": 0,
            "ports": [{"port": 3, "ifname": "s1-eth3", "tail_drops": 0, **port}]}


def test_drops_explained_and_unexplained():
    rows = classify_drops(
        switch_stats={"s1": _switch(tail_drops=12, rx_dropped=2)},
        wan={"s1:3-s5:3": {"ab": {"lost": 30, "queue_drops": 4}, "ba": {"lost": 0}},
             "s2:3-s6:3": {"ab": {"lost": 1}}},
        wan_loss={"s1:3-s5:3": 0.01},
        controller_losses=[{"link": "s5:3->s1:3", "role": "wan", "lost": 29},
                           {"link": "s1:1->s3:3", "role": "fabric", "lost": 2},
                           {"link": "s1:2->s4:3", "role": "fabric", "lost": 0}],
        collector={"socket_drops": 5, "agent_dropped": 0, "agent_lost_batches": 1,
                   "malformed": {"short": 3}, "export_lines_rejected": 7})
    got = {(r.kind, r.where): (r.count, r.explained) for r in rows}
    assert got == {
        ("switch tail drops", "s1/s1-eth3"): (12, True),
        ("switch rx dropped", "s1/s1-eth3"): (2, False),
        ("wan loss", "s1:3-s5:3 ab"): (30, True),
        ("wan tail drops", "s1:3-s5:3 ab"): (4, True),
        ("wan loss", "s2:3-s6:3 ab"): (1, False),          # that link is lossless
        ("loss map", "s5:3->s1:3"): (29, True),
        ("loss map", "s1:1->s3:3"): (2, False),
        ("collector socket", "controller"): (5, False),
        ("agent batches lost", "controller"): (1, False),
        ("malformed", "short"): (3, False),
        ("export rejected", "controller"): (7, False),
    }
    assert all(r.reason for r in rows)


def test_no_drops_no_rows():
    assert classify_drops(switch_stats={"s1": _switch()}, wan={}, wan_loss={},
                          controller_losses=[], collector={"malformed": {}}) == []


def test_export_nothing_lost_missing_and_pending():
    ok = compare_export(delivered={"int_hop": 10, "link_loss": 4},
                        held={"int_hop": 10, "link_loss": 4}, written=14, pending=0)
    assert ok.verdict == "nothing lost" and not ok.failed and ok.delivered == 14
    missing = compare_export(delivered={"int_hop": 10}, held={"int_hop": 7}, written=10,
                             pending=0)
    assert missing.lost == 3 and missing.failed and missing.verdict == "3 lines lost"
    assert missing.rows[0].missing == 3
    spooled = compare_export(delivered={"int_hop": 10}, held={"int_hop": 10}, written=15,
                             pending=5)
    assert spooled.lost == 5 and spooled.failed
    never = compare_export(delivered={}, held={}, written=0, pending=0)
    assert never.verdict == "nothing exported" and never.failed


def _samples(kind, name, pid, slope):
    t, rss, _ = _series(slope, t_end=300, step=10)
    return [ProcSample(t_s=float(a), pid=pid, kind=kind, name=name, rss_bytes=int(b),
                       cpu_pct=5.0) for a, b in zip(t, rss, strict=True)]


def test_report_shape_and_lines():
    samples = _samples("switch", "s1", 10, 0.0) + _samples("controller", "controller", 11, 4.0)
    mem = memory_table(samples, warmup_s=30)
    assert [r.kind for r in mem] == ["switch", "controller"]
    export = compare_export(delivered={"int_hop": 5}, held={"int_hop": 5}, written=5, pending=0)
    drops = classify_drops(switch_stats={"s1": _switch(tail_drops=3)}, wan={}, wan_loss={},
                           controller_losses=[], collector={})
    rep = report_dict(minutes=5, warmup_s=30, max_slope=MAX_SLOPE_MB_PER_MIN, memory=mem,
                      drops=drops, export=export, queues_max={"export_spool_batches": 0},
                      extra={"database": "x"})
    assert rep["memory_verdict"] == "growing: controller" and rep["ok"] is False
    assert rep["unexplained_drops"] == 0 and rep["export"]["verdict"] == "nothing lost"
    lines = format_report(rep)
    assert lines[-1] == "soak: FAIL"
    assert any(line.startswith("controller") and "growing (controller 11)" in line
               for line in lines)
    assert any("int_hop" in line and line.rstrip().endswith("ok") for line in lines)
    assert max(len(line) for line in lines) <= 100
