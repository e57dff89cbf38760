"""Things that cost the sender rate: loop stalls, message posting, bench limits."""
from __future__ import annotations

import time
import zlib

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


def test_the_next_payload_is_built_before_its_window_opens(monkeypatch) -> None:
    """After a post the next message's bytes are ready, so the post a completion
    allows builds nothing (building took up to 8 ms on the loaded test bed, link time
    lost at 20 ms); the payloads are the deterministic ones, in order."""
    import traffic.runner as runner_mod
    sizes = parse_size_dist("64K")
    plan = make_plan(Pattern.P2P, rank=0, nranks=2, qps=1, count=3, sizes=sizes)
    r = RankRunner(plan, ["127.0.84.1", "127.0.84.2"], EndpointConfig(ip="127.0.84.1"),
                   QpParams(), inflight=1)
    built: list[int] = []
    real = runner_mod.message_bytes
    monkeypatch.setattr(runner_mod, "message_bytes",
                        lambda seed, rank, qpn, k, size: built.append(k) or real(
                            seed, rank, qpn, k, size))
    try:
        req = r.requesters[0]
        r._feed(0.0)
        assert built == [0, 1]            # the first, then the next one ahead of time
        r._feed(0.0)
        assert len(req.messages) == 1     # the window (1) is full: nothing posted ...
        req.counters.msgs_done = 1        # ... until a completion opens it
        r._feed(0.0)
        assert len(req.messages) == 2 and built == [0, 1, 2]
        req.counters.msgs_done = 2
        r._feed(0.0)
        assert len(req.messages) == 3 and built == [0, 1, 2]  # nothing after the last
        f = plan.send[0]
        assert [m.crc32 for m in req.messages] == [
            zlib.crc32(real(r.seed, 0, f.qpn, k, f.sizes[k])) for k in range(3)]
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
