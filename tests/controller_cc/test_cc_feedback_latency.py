"""Feedback records and loop-latency bookkeeping."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import (
    FEEDBACK_DTYPE,
    HopSamples,
    HpccEngine,
    LoopLatency,
    TelemetryError,
    decode_feedback,
    delta_mod,
    delta_mod_n,
    encode_feedback,
)


def test_feedback_round_trip():
    buf = encode_feedback(flow_id=[1, 2], seq=[(1 << 32) + 5, 6], decided_ns=7,
                          rate_bps=[1.5e9, 2e9], fec_k=[16, 0], fec_m=[2, 0], flags=[1, 0])
    assert len(buf) == 2 * FEEDBACK_DTYPE.itemsize == 64
    rec = decode_feedback(buf)
    assert rec["seq"].tolist() == [5, 6]
    assert rec["rate_bps"].tolist() == [1_500_000_000, 2_000_000_000]
    assert rec["fec_k"].tolist() == [16, 0] and rec["fec_m"].tolist() == [2, 0]
    with pytest.raises(TelemetryError, match="33 bytes"):
        decode_feedback(buf[:33])


def test_delta_mod_wraps():
    assert delta_mod([5], [(1 << 32) - 5], 32).tolist() == [10]
    assert delta_mod_n([5], [995], 1000).tolist() == [10]
    assert delta_mod_n([7], [3], 1 << 64).tolist() == [4]


def test_latency_pairs_decision_and_applied():
    lat = LoopLatency(n_flows=3, capacity=4)
    lat.record_decided(np.array([0, 1]), np.array([100, 50]), 1_100)
    lat.record_applied([0, 2], [2_100, 5_000])  # flow 2 never decided: ignored
    s = lat.summary()
    assert s["telemetry_to_decision"].count == 2
    assert s["telemetry_to_decision"].max_s == pytest.approx(1_050e-9)
    assert s["decision_to_applied"].count == 1
    assert s["decision_to_applied"].p50_s == pytest.approx(1_000e-9)
    lat.record_decided(np.arange(3), np.zeros(3), 10)
    lat.record_decided(np.arange(3), np.zeros(3), 20)
    assert sorted(lat.decide.values_ns().tolist()) == [10, 20, 20, 20]


def test_engine_reports_real_loop_latency():
    import time
    e = HpccEngine(n_flows=1)
    e.start_flows([0], max_rate_bps=1e9)
    now = time.monotonic_ns()
    e.update(HopSamples(flow_idx=[0], n_hops=[1], arrival_ns=[now], node_id=[[1]],
                        ts_ns=[[0]], qlen_bytes=[[0]], tx_bytes=[[0]], line_rate_bps=[[1e9]]))
    s = e.latency.summary()["telemetry_to_decision"]
    assert s.count == 1 and 0 <= s.max_s < 5.0


def test_fec_to_wire_turns_no_fec_into_explicit_off():
    from controller.cc import fec_to_wire
    k, m = fec_to_wire([0, 16], [0, 3])
    assert k.tolist() == [1, 16] and m.tolist() == [0, 3]


def test_engine_stats():
    e = HpccEngine(n_flows=3, clock_ns=lambda: 5_000)
    e.start_flows([0, 1], max_rate_bps=1e9)
    e.update(HopSamples(flow_idx=[0], n_hops=[1], arrival_ns=[1_000], node_id=[[1]],
                        ts_ns=[[0]], qlen_bytes=[[0]], tx_bytes=[[0]], line_rate_bps=[[1e9]]))
    st = e.stats()
    assert st.samples == 1 and st.active_flows == 2 and st.flows_below_line_rate == 0
    assert st.telemetry_to_decision.p50_s == pytest.approx(4e-6)
    assert st.decision_to_applied.count == 0


def test_host_to_applied_starts_at_the_oldest_capture_the_feedback_answers():
    """End to end per feedback record: from the host sink's capture of the oldest
    telemetry of the flow in the batch to the estimated applied moment; switch reports
    (capture 0) and captures on another clock give no sample (the latter counted)."""
    lat = LoopLatency(n_flows=4)
    # flow 0: two host records (captured at 1000 and 1500), flow 1: a report (no capture),
    # flow 2: a capture "after" its arrival (another machine's clock)
    flows = np.array([0, 0, 1, 2])
    arrival = np.full(4, 4_000)
    lat.record_decided(flows, arrival, 5_000)
    lat.record_capture(flows, np.array([1_500, 1_000, 0, 9_000]), arrival)
    assert lat.clock_mismatch == 1
    lat.record_sent(np.array([0, 1, 2]), 6_000, seq=np.array([10, 11, 12]))
    # confirmations received at 8000 after a 1000 ns hold: applied at 6000 + 500 + 1000
    assert lat.record_confirmed([10, 11, 12], 6_000, 8_000, 1_000) == 3
    s = lat.summary()
    assert s["telemetry_to_applied"].count == 3
    assert s["host_to_applied"].count == 1
    assert s["host_to_applied"].max_s == pytest.approx((7_500 - 1_000) * 1e-9)
    # the next batch of flow 0 holds only a report: its feedback has no host sample
    lat.record_capture(np.array([0]), np.array([0]), np.array([9_000]))
    lat.record_sent(np.array([0]), 9_500, seq=np.array([13]))
    lat.record_confirmed([13], 9_500, 10_000, 0)
    assert lat.summary()["host_to_applied"].count == 1
