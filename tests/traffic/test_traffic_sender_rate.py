"""Things that cost the sender rate: loop stalls, message posting, bench limits."""
from __future__ import annotations

import time

from bench.bench_traffic import bdp_window, ideal_goodput, wire_bytes
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.runner import QpParams, RankRunner
from traffic.workloads import Pattern, make_plan, parse_size_dist


def test_late_loop_iteration_counts_as_stall() -> None:
    with Endpoint(EndpointConfig(ip="127.0.81.1")) as ep:
        ep.step(0.0)
        ep.step(0.0)
        assert ep.counters.stalls == 0
        time.sleep(0.03)  # stands in for a descheduled process
        ep.step(0.0)
        assert ep.counters.stalls == 1
        assert ep.counters.stall_s >= 0.025
        assert ep.stats(compact=True)["endpoint"]["stall_s"] == ep.counters.stall_s


def test_feed_posts_one_message_per_qp_per_call() -> None:
    sizes = parse_size_dist("64K")
    plan = make_plan(Pattern.P2P, rank=0, nranks=2, qps=1, count=6, sizes=sizes)
    r = RankRunner(plan, ["127.0.82.1", "127.0.82.2"], EndpointConfig(ip="127.0.82.1"),
                   QpParams(), inflight=4)
    try:
        req = r.requesters[0]
        r._feed(0.0)
        assert len(req.messages) == 1
        for _ in range(5):
            r._feed(0.0)
        assert len(req.messages) == 4  # the in-flight limit still holds
    finally:
        r.ep.close()


def test_kvcache_still_posts_its_burst_at_once() -> None:
    sizes = parse_size_dist("4K")
    plan = make_plan(Pattern.KVCACHE, rank=0, nranks=2, qps=1, count=3, sizes=sizes, prefill=1)
    r = RankRunner(plan, ["127.0.83.1", "127.0.83.2"], EndpointConfig(ip="127.0.83.1"),
                   QpParams(), inflight=1)
    try:
        r._feed(0.0)
        assert [len(q.messages) for q in r.requesters] == [len(f.sizes) for f in plan.send]
    finally:
        r.ep.close()


def test_bench_limits() -> None:
    # 1 KiB MTU: 256 packets of 1024 + 58 header bytes, one RETH
    assert wire_bytes(256 << 10, 1024) == (256 << 10) + 256 * 58 + 16
    assert bdp_window(rate=100e6, rtt_s=0.02, factor=1.0) == 231
    assert bdp_window(rate=100e6, rtt_s=0.02) == 462
    g = ideal_goodput(rate=100e6, total=4 << 20, msg=256 << 10, rtt_s=0.02)
    assert 0.85 * 100e6 < g < 0.95 * 100e6
