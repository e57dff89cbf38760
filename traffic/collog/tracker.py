"""Turns a running rank's QPs into collective-log records as their messages complete.

Why polling: the requester and responder state machines stay free of logging; the
rank's event loop calls :meth:`RankTracker.poll` on every tick, which looks only at
messages that finished since the last call (one index per QP), so the cost is per
message, not per packet.  Times are converted from the endpoint's monotonic clock to
Unix time once, so logs of different hosts line up (hosts share a clock in the test
bed; across machines NTP/PTP error adds to every start/end).
"""
from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Protocol

from traffic.collog.records import CollRecord
from traffic.collog.writer import CollectiveLogWriter
from traffic.qp_types import MessageRecord

__all__ = ["RankTracker"]

_AR_TAG = re.compile(r"ar(\d+)\.(\d+)\.(\d+)")


class _Qp(Protocol):
    messages: list[MessageRecord]

    @property
    def qpn(self) -> int: ...


class RankTracker:
    """Logs the messages of one rank's QPs (``peers[i]`` is the peer rank of QP i)."""

    def __init__(self, writer: CollectiveLogWriter, *, rank: int, comm: str, op: str,
                 host: str, mono_now: float, steps_per_seq: int = 0):
        self.w = writer
        self.rank, self.comm, self.op, self.host = rank, comm, op, host
        self.offset = time.time() - mono_now  # endpoint clock -> Unix seconds
        self.steps = steps_per_seq  # all-reduce: 2(N-1) steps per iteration
        self._qps: list[tuple[str, _Qp, int]] = []
        self._next: list[int] = []
        self._first: list[int] = []
        self._timeouts: list[int] = []

    def add(self, direction: str, qp: _Qp, peer: int, first: int = 0) -> None:
        """Log ``qp``'s messages; ``first``: the index its first message has in the
        collective (a QP made mid-job, by a rank move, starts at its boundary's step)."""
        self._qps.append((direction, qp, peer))
        self._first.append(first)
        self._next.append(0)
        self._timeouts.append(0)

    def _record(self, i: int, m: MessageRecord, index: int) -> CollRecord:
        direction, qp, peer = self._qps[i]
        index += self._first[i]
        seq, step = index, 0
        mt = _AR_TAG.fullmatch(m.tag) if m.tag else None
        if mt:
            seq, step = int(mt.group(1)), int(mt.group(2))
        elif self.steps:
            seq, step = divmod(index, self.steps)
        counters = getattr(qp, "counters", None)
        timeouts = 0
        if counters is not None and m.done_s is not None:
            timeouts = counters.timeouts - self._timeouts[i]
            self._timeouts[i] = counters.timeouts
        end = None if m.done_s is None else m.done_s + self.offset
        rates = [[t + self.offset, r] for t, r in getattr(qp, "rate_log", ())
                 if t >= m.posted_s and (m.done_s is None or t <= m.done_s)]
        # the sender's smoothed RTT as its transfer was acknowledged: a receiver that
        # holds what it receives shows there even when transfer times cannot (the
        # diagnosis' slow-receiver evidence, controller/diagnose/rtt.py)
        srtt = getattr(qp, "srtt_s", None) if direction == "send" and end is not None else None
        return CollRecord(rank=self.rank, comm=self.comm, op=self.op, seq=seq, step=step,
                          dir=direction, peer=peer, bytes=m.size, qpn=qp.qpn,
                          start=m.posted_s + self.offset, end=end, retx=m.retx_pkts,
                          timeouts=max(0, timeouts), rate_changes=rates, host=self.host,
                          srtt=None if srtt is None else round(float(srtt), 6))

    def poll(self) -> int:
        """Log the messages completed since the last call (in order per QP)."""
        n = 0
        for i, (_d, qp, _p) in enumerate(self._qps):
            msgs: Sequence[MessageRecord] = qp.messages
            k = self._next[i]
            while k < len(msgs) and msgs[k].done_s is not None:
                self.w.write(self._record(i, msgs[k], k))
                k += 1
                n += 1
            self._next[i] = k
        return n

    def finish(self) -> int:
        """Log what completed, then every unfinished message (``end`` null: hung)."""
        n = self.poll()
        for i, (_d, qp, _p) in enumerate(self._qps):
            for k in range(self._next[i], len(qp.messages)):
                self.w.write(self._record(i, qp.messages[k], k))
                n += 1
            self._next[i] = len(qp.messages)
        return n
