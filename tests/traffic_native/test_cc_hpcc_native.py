"""The native HPCC (traffic/native/cc_hpcc.c) against the Python reference, ACK by ACK.

Random ACK sequences with random INT echoes (timestamps and byte counters wrapping at
2^32, repeated records, hops without a line rate, path changes, late and duplicate
ACKs, with and without the sender's clock) go to both; after every ACK the rate, the
reference rate, the EWMA, the stage, the per-hop MultiRate state and the counters must
be equal, bit for bit: the C code keeps the reference's operand order and is built
without fused multiply-add, so there is no tolerance.
"""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats.int_echo import EchoHop
from traffic.cc.hpcc import HpccSettings, HpccState
from traffic.errors import ConfigError
from traffic.native.cc_hpcc import NativeHpcc

_M32 = 1 << 32

settings_st = st.builds(
    HpccSettings,
    eta=st.sampled_from([0.95, 0.5, 1.0, 0.9]),
    max_stage=st.integers(0, 6),
    w_ai_fraction=st.sampled_from([0.01, 0.0, 0.05, 1.0]),
    min_rate_fraction=st.sampled_from([0.001, 0.0, 0.1]),
    multi_rate=st.booleans(),
    fast_react=st.booleans(),
    update_once_per_t=st.booleans(),
)



@st.composite
def hop_delta_st(draw: st.DrawFn) -> tuple[int, int, int, int]:
    """(egress ts step in us, tx bytes step, queue bytes, line rate in Mbit/s) of a hop."""
    lr = draw(st.one_of(st.just(0), st.sampled_from([1, 4, 100, 10_000, 100_000])))
    dts = draw(st.one_of(st.just(0), st.integers(1, 100), st.integers(1, 200_000),
                         st.integers(_M32 - 1000, _M32 - 1)))      # wraps (a late record)
    load = draw(st.sampled_from([0.0, 0.3, 0.9, 1.0, 1.5, None]))
    if load is None:                                                 # anything, wraps
        dtx = draw(st.one_of(st.integers(0, 10_000_000), st.integers(_M32 - 1000, _M32 - 1)))
    else:
        dtx = int(dts % 1_000_000 * max(lr, 1) / 8 * load)
    q = draw(st.one_of(st.just(0), st.integers(0, 2_000_000)))
    return dts, dtx % _M32, q, lr


ack_st = st.tuples(
    st.integers(0, 30).map(lambda i: max(0, i - 28)),  # path: rarely another one
    st.lists(hop_delta_st(), min_size=3, max_size=3),  # per hop of the longest path
    st.integers(-2, 5),                              # ack_seq step (late / duplicate ACKs)
    st.integers(0, 5),                               # next_seq step
    st.one_of(st.none(), st.floats(0.0, 0.2)),       # clock step; None: no clock
)

PATHS = [(11, 12, 13), (11, 22, 13), (11,)]


def _same(c: NativeHpcc, p: HpccState, *, where: str) -> None:
    s = c.state
    got = (s.rate_bps, s.ref_rate_bps, s.u, s.inc_stage, s.updates, s.fast_reacts,
           s.skipped_hops, s.path_changes, s.last_update_seq)
    want = (p.rate_bps, p.ref_rate_bps, p.u, p.inc_stage, p.updates, p.fast_reacts,
            p.skipped_hops, p.path_changes, p.last_update_seq)
    assert got == want, where
    lus = None if math.isnan(s.last_update_s) else s.last_update_s
    assert lus == p.last_update_s, where
    for i, h in enumerate(p._hop_state):
        assert (s.hop[i].u, s.hop[i].rc, s.hop[i].inc_stage) == (h.u, h.rc, h.inc_stage), where


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hs=settings_st, line_rate=st.sampled_from([1e6, 4e6, 1e8, 2.5e10]),
       base_rtt=st.sampled_from([1e-5, 1e-3, 0.03, 0.1]), start=st.integers(0, _M32 - 1),
       acks=st.lists(ack_st, min_size=8, max_size=60))
def test_every_ack_gives_the_same_rate_and_state(hs: HpccSettings, line_rate: float,
                                                 base_rtt: float, start: int,
                                                 acks: list) -> None:
    c, p = NativeHpcc(line_rate, hs), HpccState(max_rate_bps=line_rate, settings=hs)
    abs_hops = [[start, start, 0, 0] for _ in range(3)]
    ack_seq = next_seq = 0
    now: float | None = 0.0
    for n, (path_i, deltas, d_ack, d_next, d_now) in enumerate(acks):
        path = PATHS[path_i]
        hops = []
        for i, node in enumerate(path):
            dts, dtx, q, lr = deltas[i]
            a = abs_hops[i]
            a[0], a[1] = (a[0] + dts) % _M32, (a[1] + dtx) % _M32
            hops.append(EchoHop(node, a[0], a[1], q, lr))
        next_seq += d_next
        ack_seq = max(0, ack_seq + d_ack)
        now = None if d_now is None else (now or 0.0) + d_now
        kw = {"ack_seq": ack_seq, "next_seq": next_seq, "base_rtt_s": base_rtt, "now_s": now}
        got = c.on_ack(hops, **kw)
        want = p.on_ack(hops, **kw)
        assert got == want, f"ACK {n}"
        _same(c, p, where=f"ACK {n} {hops} {kw}")
        assert c.window_bytes(base_rtt) == p.window_bytes(base_rtt)


def _idle_hop_acks(k: int) -> tuple[list[EchoHop], dict]:
    return [EchoHop(1, 40000 * k, 0, 0, 4)], {"ack_seq": k + 1, "next_seq": k + 1,
                                                   "base_rtt_s": 0.03, "now_s": 0.04 * k}


def test_multi_rate_idle_hop_gives_the_line_rate_not_a_division_by_zero() -> None:
    """A hop with no bytes sent and no queue over T: u -> 0, the limit is the line rate."""
    hs = HpccSettings(multi_rate=True)
    c, p = NativeHpcc(4e6, hs), HpccState(max_rate_bps=4e6, settings=hs)
    for k in range(12):
        hops, kw = _idle_hop_acks(k)
        assert c.on_ack(hops, **kw) == p.on_ack(hops, **kw)
        assert c.rate_bps == 4e6
        _same(c, p, where=f"ACK {k}")
    # past max_stage additive steps, the multiplicative step divides by u / eta = 0
    assert c.state.hop[0].u == 0.0 and c.state.updates >= hs.max_stage + 1


def test_congested_hop_cuts_the_rate_and_agrees_with_the_reference() -> None:
    """A plain scenario, readable: one hop at line rate with a standing queue."""
    hs = HpccSettings()
    c, p = NativeHpcc(1e8, hs), HpccState(max_rate_bps=1e8, settings=hs)
    for k in range(20):
        hops = [EchoHop(5, 1000 * k, 12_500 * k, 50_000, 100)]  # 100 Mbit/s busy, 50 KB queue
        kw: dict[str, Any] = {"ack_seq": k + 1, "next_seq": k + 3, "base_rtt_s": 0.001,
                              "now_s": 0.001 * k}
        assert c.on_ack(hops, **kw) == p.on_ack(hops, **kw)
        _same(c, p, where=f"ACK {k}")
    assert c.rate_bps < 0.5e8


def test_too_many_hops_and_bad_settings_are_errors() -> None:
    c = NativeHpcc(1e8, HpccSettings())
    with pytest.raises(ConfigError, match="9 hops"):
        c.on_ack([EchoHop(i, 0, 0, 0, 1) for i in range(9)], ack_seq=0, next_seq=0,
                 base_rtt_s=0.03)
    with pytest.raises(ConfigError, match="line rate"):
        NativeHpcc(0.0, HpccSettings())


def test_base_rtt_and_window_match_the_reference() -> None:
    for hs in (HpccSettings(), HpccSettings(base_rtt_s=0.002), HpccSettings(min_base_rtt_s=1e-4)):
        c = NativeHpcc(1e8, hs)
        for m in (None, 0.0, 5e-5, 0.01, 0.5):
            assert c.base_rtt(m) == hs.base_rtt(m)
        p = HpccState(max_rate_bps=1e8, settings=hs)
        assert c.window_bytes(0.03) == p.window_bytes(0.03)
