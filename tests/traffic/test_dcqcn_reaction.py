"""DCQCN in the sender: requesters with cc=dcqcn through a marking bottleneck, in
simulated time (no sockets): cuts on CNPs, recovery, line rate without CNPs,
feedback as a cap, CNP coalescing, configuration errors."""
from __future__ import annotations

import collections
import heapq
import zlib
from dataclasses import dataclass, field

import pytest

from formats import roce
from traffic.cc.dcqcn import TIME_SCALE, DcqcnReactionPoint, DcqcnSettings
from traffic.errors import ConfigError
from traffic.qp_types import QpConfig
from traffic.requester import WIRE_OVERHEAD, Requester
from traffic.responder import Responder

CNP_GAP_S = 50e-6  # the receiving endpoint's CNP interval per QP


@dataclass
class MarkingBottleneck:
    """N requester/responder pairs sharing one FIFO of ``rate_bps`` (tail drop at
    ``limit_pkts``) that marks CE when the queue holds more than ``mark_pkts``; each
    receiver answers a CE packet with a CNP (at most one per QP per 50 us).  One-way
    delay ``delay_s`` on every path; time advances in ``dt_s`` steps."""

    pairs: list[tuple[Requester, Responder]]
    rate_bps: float
    mark_pkts: int = 8
    limit_pkts: int = 64
    delay_s: float = 0.001
    dt_s: float = 0.0005
    now: float = 0.0
    queue: collections.deque = field(default_factory=collections.deque)
    credit: float = 0.0
    events: list = field(default_factory=list)
    n: int = 0
    drops: int = 0
    marked: int = 0
    max_queue: int = 0
    queue_samples: list = field(default_factory=list)
    last_cnp: dict = field(default_factory=dict)

    def _at(self, t: float, kind: str, i: int, buf: bytes) -> None:
        self.n += 1
        heapq.heappush(self.events, (t, self.n, kind, i, buf))

    def step(self) -> None:
        self.now += self.dt_s
        now = self.now
        out: list[bytes] = []
        for i, (req, _) in enumerate(self.pairs):
            out.clear()
            req.poll(now, out)
            for b in out:
                if len(self.queue) >= self.limit_pkts:
                    self.drops += 1
                    continue
                self.queue.append((i, b, len(self.queue) >= self.mark_pkts))
        self.max_queue = max(self.max_queue, len(self.queue))
        self.queue_samples.append(len(self.queue))
        self.credit += self.rate_bps / 8 * self.dt_s
        while self.queue and self.credit >= len(self.queue[0][1]) + WIRE_OVERHEAD:
            i, b, ce = self.queue.popleft()
            self.credit -= len(b) + WIRE_OVERHEAD
            self._at(now + self.delay_s, "ce" if ce else "data", i, b)
        if not self.queue:
            self.credit = min(self.credit, 2 * 1100)
        while self.events and self.events[0][0] <= now:
            _, _, kind, i, buf = heapq.heappop(self.events)
            req, resp = self.pairs[i]
            if kind in ("data", "ce"):
                resp.on_packet(roce.parse_udp_payload(buf), now)
                if kind == "ce":
                    self.marked += 1
                    if now - self.last_cnp.get(i, -1.0) >= CNP_GAP_S:
                        self.last_cnp[i] = now
                        self._at(now + self.delay_s, "cnp", i, b"")
            elif kind == "ack":
                req.on_ack(roce.parse_udp_payload(buf), now)
            else:
                req.on_cnp(now)
        for i, (_, resp) in enumerate(self.pairs):
            ack = resp.take_ack()
            if ack is not None:
                self._at(now + self.delay_s, "ack", i, ack)

    def run(self, seconds: float) -> None:
        end = self.now + seconds
        while self.now < end:
            self.step()


def _pair(i: int, *, cc: str, rate_bps: float,
          settings: DcqcnSettings | None = None) -> tuple[Requester, Responder]:
    kw = {"dcqcn": settings} if settings is not None else {}
    req = Requester(cfg=QpConfig(qpn=10 + i, peer_qpn=20 + i, peer_ip="10.0.0.2", cc=cc,
                                 rate_bps=rate_bps, window_pkts=256, **kw),
                    local_ip=f"10.0.1.{i + 1}", sport=1000 + i)
    resp = Responder(cfg=QpConfig(qpn=20 + i, peer_qpn=10 + i, peer_ip=f"10.0.1.{i + 1}"),
                     local_ip="10.0.0.2", sport=2000 + i)
    return req, resp


def _post(req: Requester, nbytes: int, n: int) -> list[bytes]:
    msgs = [bytes([k % 251]) * nbytes for k in range(n)]
    for m in msgs:
        req.post_write(m)
    return msgs


def _incast(cc: str, *, senders: int = 4, seconds: float = 3.0) -> MarkingBottleneck:
    """``senders`` QPs at 4 Mbit/s each into an 8 Mbit/s bottleneck (2x overload)."""
    pairs = [_pair(i, cc=cc, rate_bps=4e6) for i in range(senders)]
    for req, _ in pairs:
        _post(req, 64 * 1024, 40)
    link = MarkingBottleneck(pairs=pairs, rate_bps=8e6)
    link.run(seconds)
    return link


def test_dcqcn_cuts_on_cnps_and_keeps_the_marking_queue_short():
    none = _incast("none")
    dcqcn = _incast("dcqcn")
    # without CC the 2x overload fills the queue and drops; CNPs are only counted
    assert none.max_queue == 64 and none.drops > 100
    assert all(r.cfg.rate_bps == 4e6 for r, _ in none.pairs)
    assert sum(r.counters.cnps_rx for r, _ in none.pairs) > 0
    # DCQCN: every sender got CNPs and cut its rate
    for req, _ in dcqcn.pairs:
        rp = req.dcqcn
        assert rp is not None and rp.rate_cuts > 0 and rp.cnps_rx >= rp.cnps_applied > 0
        assert rp.min_rate_seen_bps < 4e6
        assert len(req.rate_log) > 3
    # ... so the queue stays near the marking threshold, far from the tail-drop limit
    tail = sorted(dcqcn.queue_samples[len(dcqcn.queue_samples) // 2:])
    median = tail[len(tail) // 2]
    tail_none = sorted(none.queue_samples[len(none.queue_samples) // 2:])
    assert median < tail_none[len(tail_none) // 2] / 2, (median, tail_none[len(tail_none) // 2])
    assert dcqcn.drops < none.drops / 4, (dcqcn.drops, none.drops)
    # the senders' rates sum to about the bottleneck (not far below: no collapse)
    delivered = sum(resp.counters.delivered_bytes for _, resp in dcqcn.pairs)
    assert delivered * 8 / 3.0 > 0.6 * 8e6


def test_dcqcn_recovers_to_line_rate_once_the_marks_stop():
    pairs = [_pair(0, cc="dcqcn", rate_bps=4e6), _pair(1, cc="dcqcn", rate_bps=4e6)]
    for req, _ in pairs:
        _post(req, 64 * 1024, 60)
    link = MarkingBottleneck(pairs=pairs, rate_bps=4e6)
    link.run(1.5)
    cut = [r.cfg.rate_bps for r, _ in pairs]
    assert all(r < 4e6 for r in cut), cut
    cuts_before = [r.dcqcn.rate_cuts for r, _ in pairs]
    link.rate_bps = 100e6  # congestion gone: no more marks
    link.run(3.0)
    assert [r.dcqcn.rate_cuts for r, _ in pairs] == cuts_before
    for req, _ in pairs:
        assert req.cfg.rate_bps > 0.99 * 4e6, req.rate_log[-5:]
        assert req.dcqcn.rate_increases > 5


def test_without_cnps_a_dcqcn_qp_stays_at_line_rate():
    req, resp = _pair(0, cc="dcqcn", rate_bps=4e6)
    msgs = _post(req, 32 * 1024, 10)
    link = MarkingBottleneck(pairs=[(req, resp)], rate_bps=50e6)
    link.run(1.0)
    assert resp.counters.msgs_done == len(msgs)
    assert [m.crc32 for m in resp.messages] == [zlib.crc32(m) for m in msgs]
    assert req.counters.cnps_rx == 0 and req.dcqcn.rate_cuts == 0
    assert req.cfg.rate_bps == 4e6 and req.rate_log == [(0.0, 4e6)]
    snap = req.snapshot()
    assert snap["cc"] == "dcqcn" and snap["dcqcn"]["rate_cuts"] == 0
    assert snap["dcqcn"]["line_rate_bps"] == 4e6


def test_rate_feedback_caps_the_dcqcn_rate():
    req, _ = _pair(0, cc="dcqcn", rate_bps=10e6)
    req.set_rate(2e6, 0.01)
    assert req.cfg.rate_bps == 2e6 and req.dcqcn.rate_bps == 10e6
    req.on_cnp(0.02)  # DCQCN: 10 -> 5 Mbit/s, still above the cap
    assert req.dcqcn.rate_bps == pytest.approx(5e6) and req.cfg.rate_bps == 2e6
    req.set_rate(8e6, 0.03)  # a higher cap: DCQCN's own rate rules
    assert req.cfg.rate_bps == pytest.approx(5e6)
    with pytest.raises(ConfigError, match="QP 10: rate_bps=10"):
        req.set_rate(10, 0.04)


def test_cnps_within_the_scaled_interval_count_once():
    rp = DcqcnReactionPoint(line_rate_bps=8e6, now_s=1.0)
    assert rp.on_cnp(1.0) is True
    for k in range(1, 20):  # CNPs 2 ms apart: inside the 50 ms interval
        assert rp.on_cnp(1.0 + k * 0.002) is False
    assert (rp.cnps_rx, rp.cnps_applied, rp.rate_cuts) == (20, 1, 1)
    assert rp.rate_bps == pytest.approx(4e6)  # alpha starts at 1: halved
    assert rp.on_cnp(1.0 + 0.06) is True
    assert rp.rate_cuts == 2 and rp.rate_bps < 4e6


def test_timers_run_only_when_due():
    rp = DcqcnReactionPoint(line_rate_bps=8e6)
    rp.on_cnp(0.0)
    r0 = rp.rate_bps
    assert rp.tick(0.001) is False and rp.rate_bps == r0
    assert rp.tick(0.056) is True and rp.rate_bps > r0  # first fast-recovery step
    assert rp.rate_bps == pytest.approx((r0 + 8e6) / 2)


def test_byte_counter_is_time_at_line_rate():
    s = DcqcnSettings()
    assert s.timer_s == pytest.approx(55e-6 * TIME_SCALE)
    assert s.params(8e6).byte_counter_bytes == 100_000
    assert s.params(1e3, mtu=1024).byte_counter_bytes == 2048


def test_configuration_errors_name_the_value():
    with pytest.raises(ConfigError, match="congestion control 'reno' unknown"):
        QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", cc="reno")
    assert QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", cc="DCQCN").cc == "dcqcn"
    with pytest.raises(ConfigError, match="timer_s=0 outside"):
        DcqcnSettings(timer_s=0)
    with pytest.raises(ConfigError, match="g=2 outside"):
        DcqcnSettings(g=2)
    with pytest.raises(ConfigError, match="line rate 10"):
        DcqcnReactionPoint(line_rate_bps=10)
