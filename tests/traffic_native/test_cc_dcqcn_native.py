"""The native DCQCN reaction point (traffic/native/cc_dcqcn.c) against the Python one.

Random sequences of CNPs (bursts inside the CNP interval, ties at the decrease
interval), timer ticks (early, due, hours late: more than the 256 increase events the
engine applies) and sent bytes (below, at and across the byte counter) go to both
traffic.cc.dcqcn.DcqcnReactionPoint and the C code; after every event the stages, byte
count, deadlines, counters and return values must be equal, and so must the rates,
target and alpha, bit for bit but for one source: alpha's decay over n missed alpha
timers is ``(1 - g) ** n``, which the reference computes with numpy's SIMD ``power``
(on this machine's AVX-512, 1 ULP off glibc's ``pow``, which the C code and Python's
``math.pow`` call).  So floats may differ by a few ULP after an event, and the test then
copies the reference's floats into the C state: every event starts from the same state,
and a difference cannot grow into another decision.
"""
from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traffic.cc.dcqcn import DcqcnReactionPoint, DcqcnSettings
from traffic.errors import ConfigError
from traffic.native.cc_dcqcn import NativeDcqcn

settings_st = st.builds(
    DcqcnSettings,
    timer_s=st.sampled_from([0.055, 1e-4, 0.3]),
    alpha_interval_s=st.sampled_from([0.055, 1e-4, 0.01]),
    cnp_interval_s=st.sampled_from([0.05, 0.0, 0.001]),
    decrease_interval_s=st.sampled_from([0.004, 0.0, 0.05]),
    byte_counter_s=st.sampled_from([0.1, 1e-4, 1.0]),
    g=st.sampled_from([1 / 256, 0.0, 0.5, 1.0]),
    fast_recovery_stages=st.integers(0, 6),
    rate_ai_fraction=st.sampled_from([0.001, 0.0, 0.5]),
    rate_hai_fraction=st.sampled_from([0.01, 0.0, 1.0]),
    min_rate_fraction=st.sampled_from([0.001, 0.0, 0.9]),
)

step_st = st.one_of(st.just(0.0), st.sampled_from([0.004, 0.05, 0.055, 1e-4]),
                    st.floats(0.0, 0.01), st.floats(0.0, 0.2), st.floats(0.0, 100.0))

event_st = st.one_of(
    st.tuples(st.just("sent"), st.one_of(st.integers(0, 2048), st.integers(0, 10_000_000))),
    st.tuples(st.just("tick"), step_st),
    st.tuples(st.just("cnp"), step_st),
)


_ULPS = 4


def _close(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= _ULPS * math.ulp(b)


def _same(c: NativeDcqcn, p: DcqcnReactionPoint, *, where: str) -> None:
    s, e = c.state, p.engine
    floats = (c.rate_bps, s.rate_bps, s.target_bps, s.alpha, s.min_rate_seen_bps)
    ref = (p.rate_bps, float(e.rate_bps[0]), float(e.target_bps[0]), float(e.alpha[0]),
           p.min_rate_seen_bps)
    assert all(_close(a, b) for a, b in zip(floats, ref, strict=True)), (where, floats, ref)
    s.rate_bps, s.target_bps, s.alpha, s.min_rate_seen_bps = ref[1:]   # see the docstring
    got = (s.timer_stage, s.byte_stage,
           s.byte_count, s.alpha_deadline_ns, s.timer_deadline_ns, s.last_decrease_ns,
           s.cnps_seen, s.decreases, s.cnps_rx, s.cnps_applied, s.rate_cuts,
           s.rate_increases, s.unsent, s.due_ns, s.bytes_due,
           s.last_cnp_s, s.now_s, s.byte_counter_bytes)
    want = (int(e.timer_stage[0]), int(e.byte_stage[0]), int(e.byte_count[0]),
            int(e.alpha_deadline_ns[0]), int(e.timer_deadline_ns[0]),
            int(e.last_decrease_ns[0]), e.cnps_seen, e.decreases, p.cnps_rx, p.cnps_applied,
            p.rate_cuts, p.rate_increases, p._unsent, p._due_ns,
            p._bytes_due, p._last_cnp_s, p.now_s, e.params.byte_counter_bytes)
    assert got == want, where


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ds=settings_st, line_rate=st.sampled_from([1e3, 4e6, 1e8, 4e10, 4e11]),
       mtu=st.sampled_from([64, 1024, 9000]), start=st.floats(0.0, 1e5),
       events=st.lists(event_st, min_size=10, max_size=80))
def test_every_event_gives_the_same_rate_and_state(ds: DcqcnSettings, line_rate: float,
                                                   mtu: int, start: float,
                                                   events: list) -> None:
    c = NativeDcqcn(line_rate, ds, mtu=mtu, now_s=start)
    p = DcqcnReactionPoint(line_rate_bps=line_rate, settings=ds, mtu=mtu, now_s=start)
    _same(c, p, where="start")
    now = start
    for n, (kind, v) in enumerate(events):
        if kind == "sent":
            c.on_sent(v)
            p.on_sent(v)
        else:
            now += v
            got, want = (c.tick(now), p.tick(now)) if kind == "tick" else (c.on_cnp(now),
                                                                          p.on_cnp(now))
            assert got == want, f"event {n} {kind} at {now}"
        _same(c, p, where=f"event {n} {kind} {v} at {now}")


def test_cut_then_recovery_agrees_with_the_reference() -> None:
    """A plain scenario, readable: three CNPs, then quiet time and traffic."""
    ds = DcqcnSettings()
    c, p = NativeDcqcn(1e7, ds), DcqcnReactionPoint(line_rate_bps=1e7, settings=ds)
    for t in (0.01, 0.07, 0.13):
        assert c.on_cnp(t) and p.on_cnp(t)
    low = c.rate_bps
    for k in range(1, 200):
        c.on_sent(1024)
        p.on_sent(1024)
        assert c.tick(0.13 + 0.01 * k) == p.tick(0.13 + 0.01 * k)
        _same(c, p, where=f"tick {k}")
    assert low < 0.3e7 and c.rate_bps > 2 * low  # cut to under a third, recovering


def test_out_of_range_settings_are_errors() -> None:
    with pytest.raises(ConfigError, match="line rate"):
        NativeDcqcn(10.0, DcqcnSettings())
