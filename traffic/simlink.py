"""In-memory link between one requester and one responder, in simulated time.

Why: the reliability rules (go-back-N, selective repeat, FEC) are checked here packet
by packet with exact loss patterns and no sockets, so unit tests are deterministic and
fast; the socket endpoint reuses the same state machines unchanged.
"""
from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from formats import roce
from formats.roce import Opcode
from traffic.requester import Requester
from traffic.responder import Responder

__all__ = ["SimLink", "SimResult"]


@dataclass(slots=True, kw_only=True)
class SimResult:
    time_s: float
    data_dropped: int
    repair_dropped: int
    delivered: int


@dataclass(slots=True, kw_only=True)
class SimLink:
    """Carries packets with one-way delay ``delay_s``; ``drop(n, payload)`` decides loss
    of the n-th forward packet (acks are never dropped)."""

    req: Requester
    resp: Responder
    delay_s: float = 0.001
    drop: Callable[[int, bytes], bool] = lambda n, b: False
    now: float = 0.0
    data_dropped: int = 0
    repair_dropped: int = 0
    _q: list = field(default_factory=list)
    _n: int = 0
    _fwd: int = 0

    def _push(self, t: float, kind: str, buf: bytes) -> None:
        self._n += 1
        heapq.heappush(self._q, (t, self._n, kind, buf))

    def run(self, *, until: Callable[[], bool], max_s: float = 60.0) -> SimResult:
        out: list[bytes] = []
        while not until():
            if self.now > max_s:
                raise TimeoutError(f"simulated link: not done after {max_s} s")
            out.clear()
            wake = self.req.poll(self.now, out)
            for b in out:
                self._fwd += 1
                if self.drop(self._fwd, b):
                    if b[0] == Opcode.FEC_REPAIR:
                        self.repair_dropped += 1
                    else:
                        self.data_dropped += 1
                    continue
                self._push(self.now + self.delay_s, "fwd", b)
            # deliver everything due now, then let the responder ack once (a batch)
            nxt = self._q[0][0] if self._q else None
            cands = [t for t in (wake, nxt) if t is not None]
            if not cands:
                raise RuntimeError("simulated link: nothing scheduled and not done")
            t = max(self.now, min(cands))
            if t > self.now:
                self.now = t
                continue
            while self._q and self._q[0][0] <= self.now:
                _, _, kind, buf = heapq.heappop(self._q)
                pkt = roce.parse_udp_payload(buf)
                if kind == "fwd":
                    self.resp.on_packet(pkt, self.now)
                else:
                    self.req.on_ack(pkt, self.now)
            ack = self.resp.take_ack()
            if ack is not None:
                self._push(self.now + self.delay_s, "rev", ack)
            if wake is not None and wake <= self.now and not out:
                self.now += 1e-6
        return SimResult(time_s=self.now, data_dropped=self.data_dropped,
                         repair_dropped=self.repair_dropped,
                         delivered=self.resp.counters.msgs_done)
