"""Printed tables (golden text)."""
from __future__ import annotations

import numpy as np

from controller.cc import HopSamples, HpccEngine, RateDecisions
from controller.cc.report import rate_table, stats_lines

GOLDEN = """\
flow                     rate Gbit/s bottleneck      U
10.0.1.1:49152>10.0.2.1       12.500      hop 1  0.980
10.0.1.1:49153>10.0.2.1       25.000          -  0.000"""


def test_rate_table_golden():
    d = RateDecisions(flow_idx=np.array([0, 1]), rate_bps=np.array([12.5e9, 25e9]),
                      bottleneck_hop=np.array([1, -1]), utilisation=np.array([0.98, 0.0]),
                      updated=np.array([True, False]))
    out = rate_table(d, ["10.0.1.1:49152>10.0.2.1", "10.0.1.1:49153>10.0.2.1"])
    assert "\n".join(out) == GOLDEN


def test_stats_lines():
    e = HpccEngine(n_flows=2, clock_ns=lambda: 2_000_000)
    e.start_flows([0], max_rate_bps=1e9)
    e.update(HopSamples(flow_idx=[0], n_hops=[1], arrival_ns=[1_000_000], node_id=[[1]],
                        ts_ns=[[0]], qlen_bytes=[[0]], tx_bytes=[[0]], line_rate_bps=[[1e9]]))
    out = stats_lines(e.stats())
    assert out[0] == "samples 1, flows 1 (0 below line rate)"
    assert out[1] == "telemetry -> decision : p50 1.000 ms, p99 1.000 ms (1)"
    assert out[2].endswith(": -")
