"""The engine's pacer smoothing (``tn_qp_attr.catchup_s``), on an injected clock.

A QP paced at 10k packets/s whose engine wakes up late catches the lateness up a
little per packet (never more than ``catchup_s`` sooner than the packet's time at
the rate) instead of sending what its bucket saved in a burst, and keeps its rate;
with ``catchup_s`` 0 the token bucket alone decides (the reference's pacer, which
the differential tests compare packet for packet).
"""
from __future__ import annotations

import itertools

import pytest

from traffic.native_endpoint import StepEngine, engine_available
from traffic.qp_types import QpConfig

pytestmark = pytest.mark.skipif(not engine_available(),
                                reason="native engine not built (make -C traffic/native)")

A, B = "10.9.2.1", "10.9.2.2"
QPN = 0x030405
MTU = 1024
WIRE = MTU + 12 + 4 + 42       # a MIDDLE packet's frame
PPS = 10_000
GAP = 1 / PPS


def _departures(catchup_s: float, late_at: float, late_by: float) -> list[float]:
    """Departure times of a 10k pkt/s QP stepped at every due time, but the step due
    first at or after ``late_at`` comes ``late_by`` late (a late wake-up)."""
    e = StepEngine(A)
    try:
        q = QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B, mtu=MTU, rate_bps=PPS * WIRE * 8,
                     window_pkts=4000)
        e.add_qp(q, requester=True, sport=50021, burst_s=50e-6, min_burst_bytes=2 * 1100,
                 catchup_s=catchup_s)
        e.post_write(QPN, bytes(MTU * 60))
        out: list[float] = []
        t, late_done = 0.0, False
        while len(out) < 60:
            due = e.step(t)
            out += [t] * len(e.output())
            assert due is not None
            t = max(due, t + 1e-7)  # (a due time a rounding error away: the clock moves on)
            if not late_done and t >= late_at:
                t += late_by
                late_done = True
        return out
    finally:
        e.close()


def test_a_late_wake_up_is_caught_up_without_a_burst() -> None:
    dep = _departures(15e-6, late_at=0.0021, late_by=60e-6)
    gaps = [b - a for a, b in itertools.pairwise(dep[8:])]  # (past the full bucket)
    late = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[late] >= GAP + 40e-6                           # the late one
    assert min(gaps) >= GAP - 15e-6 - 1e-9                    # then 15 us sooner at most
    assert sum(1 for g in gaps[late:] if g < GAP - 1e-6) >= 2  # ... over several packets
    # and the rate holds: what the late wake-up cost is paid back
    assert dep[-1] - dep[8] == pytest.approx(len(gaps) * GAP, abs=2e-6)


def test_without_smoothing_the_bucket_sends_its_saving_at_once() -> None:
    dep = _departures(0.0, late_at=0.0021, late_by=60e-6)
    gaps = [b - a for a, b in itertools.pairwise(dep[8:])]
    assert min(gaps) < GAP - 50e-6   # the bucket's saving in one gap (the reference's pacer)
