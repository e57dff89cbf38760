"""Send rate/FEC feedback records to the senders' host agents over UDP.

The thin I/O shell around ``feedback.encode_feedback``: flows are grouped by
their agent's address, records are packed into datagrams of at most
``max_records`` (43 x 32 B fits a 1500-byte MTU), and a flow whose rate moved
by less than ``min_change_fraction`` since its last feedback (and whose FEC is
unchanged) is skipped, so steady flows cost nothing on the wire.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

import numpy as np
import numpy.typing as npt

from controller.cc.errors import FlowIndexError, ParameterError
from controller.cc.feedback import encode_feedback


@dataclass(slots=True, kw_only=True)
class SenderStats:
    datagrams: int = 0
    records: int = 0
    suppressed: int = 0
    send_errors: int = 0


@dataclass(slots=True, kw_only=True)
class FeedbackSender:
    """Per-flow agent addresses and last-sent values; ``send`` ships one round."""

    n_flows: int
    min_change_fraction: float = 0.01
    max_records: int = 43
    clock_ns: Callable[[], int] = time.monotonic_ns
    stats: SenderStats = field(default_factory=SenderStats)
    _sock: socket.socket | None = field(init=False, default=None, repr=False)
    _agent: list[tuple[str, int] | None] = field(init=False, repr=False)
    _flow_id: np.ndarray = field(init=False, repr=False)
    _last_rate: np.ndarray = field(init=False, repr=False)
    _last_fec: np.ndarray = field(init=False, repr=False)
    _seq: int = field(init=False, default=0)
    last_sent: np.ndarray = field(init=False, repr=False)
    """Flow rows that got a record in the last ``send`` call."""
    last_sent_ns: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.n_flows <= 0:
            raise ParameterError(f"FeedbackSender.n_flows = {self.n_flows} must be positive")
        if not 0 <= self.min_change_fraction < 1:
            raise ParameterError(
                f"FeedbackSender.min_change_fraction = {self.min_change_fraction} not in [0, 1)")
        if not 1 <= self.max_records <= 2000:
            raise ParameterError(f"FeedbackSender.max_records = {self.max_records} not in 1..2000")
        self._agent = [None] * self.n_flows
        self._flow_id = np.zeros(self.n_flows, dtype=np.int64)
        self._last_rate = np.full(self.n_flows, -1.0)
        self._last_fec = np.full((self.n_flows, 2), -1, dtype=np.int64)
        self.last_sent = np.zeros(0, dtype=np.int64)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def bind_flow(self, flow_idx: int, *, agent: tuple[str, int], flow_id: int) -> None:
        """Feedback for row ``flow_idx`` goes to ``agent`` as the agent's ``flow_id`` (QP)."""
        if not 0 <= flow_idx < self.n_flows:
            raise FlowIndexError(f"FeedbackSender.bind_flow: flow {flow_idx} outside "
                                 f"0..{self.n_flows - 1}")
        if not 0 <= flow_id <= 0xFFFFFFFF:
            raise ParameterError(f"FeedbackSender.bind_flow: flow_id {flow_id} is not a u32")
        self._agent[flow_idx] = agent
        self._flow_id[flow_idx] = flow_id
        self._last_rate[flow_idx] = -1.0
        self._last_fec[flow_idx] = -1

    def send_fec(self, flow_idx: npt.ArrayLike, fec_k: npt.ArrayLike,
                 fec_m: npt.ArrayLike, flags: npt.ArrayLike = 0) -> int:
        """FEC-only feedback (rate field 0: unchanged) for flows whose (k, m) changed;
        ``controller.lossmap.path_fec`` + ``fec_to_wire`` give the arguments."""
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            raise FlowIndexError(f"FeedbackSender.send_fec: flow index outside "
                                 f"0..{self.n_flows - 1}")
        keep = np.where(self._last_rate[idx] >= 0, self._last_rate[idx], np.nan)
        return self.send(idx, keep, fec_k=fec_k, fec_m=fec_m, flags=flags)

    def send(self, flow_idx: npt.ArrayLike, rate_bps: npt.ArrayLike, *,
             fec_k: npt.ArrayLike = 0, fec_m: npt.ArrayLike = 0,
             flags: npt.ArrayLike = 0) -> int:
        """Send what changed among ``flow_idx``; returns the number of records sent.

        Unbound flows are skipped (counted as suppressed). ``fec_k`` 0 leaves the
        sender's FEC as it is (see ``feedback.fec_to_wire`` to switch FEC off); a
        NaN rate leaves the rate as it is.
        """
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            raise FlowIndexError(f"FeedbackSender.send: flow index outside 0..{self.n_flows - 1}")
        rate = np.broadcast_to(np.asarray(rate_bps, dtype=np.float64), idx.shape)
        k = np.broadcast_to(np.asarray(fec_k, dtype=np.int64), idx.shape)
        m = np.broadcast_to(np.asarray(fec_m, dtype=np.int64), idx.shape)
        fl = np.broadcast_to(np.asarray(flags, dtype=np.int64), idx.shape)
        last = self._last_rate[idx]
        # NaN rate: leave the rate alone (FEC-only feedback)
        moved = ~np.isnan(rate) & (
            (last < 0) | (np.abs(rate - last) > self.min_change_fraction * np.maximum(last, 1)))
        fec_changed = (k > 0) & ((self._last_fec[idx, 0] != k) | (self._last_fec[idx, 1] != m))
        bound = np.array([self._agent[i] is not None for i in idx], dtype=bool)
        go = (moved | fec_changed) & bound
        self.stats.suppressed += int(idx.size - go.sum())
        sel = np.flatnonzero(go)
        self.last_sent = np.zeros(0, dtype=np.int64)
        if sel.size == 0:
            return 0
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        now = int(self.clock_ns())
        by_agent: dict[tuple[str, int], list[int]] = {}
        for j in sel:  # group by destination: one dict entry per agent, not per packet
            by_agent.setdefault(self._agent[idx[j]], []).append(int(j))  # type: ignore[arg-type]
        sent = 0
        sent_rows: list[np.ndarray] = []
        for agent, rows_list in by_agent.items():
            rows = np.asarray(rows_list)
            for start in range(0, rows.size, self.max_records):
                r = rows[start:start + self.max_records]
                seq = self._seq + np.arange(r.size)
                self._seq = (self._seq + r.size) & 0xFFFFFFFF
                buf = encode_feedback(flow_id=self._flow_id[idx[r]], seq=seq, decided_ns=now,
                                      rate_bps=np.where(moved[r], rate[r], 0.0),
                                      fec_k=k[r], fec_m=m[r], flags=fl[r])
                try:
                    self._sock.sendto(buf, agent)
                except OSError:
                    self.stats.send_errors += 1
                    continue
                self.stats.datagrams += 1
                self.stats.records += int(r.size)
                sent += int(r.size)
                sent_rows.append(idx[r])
                self._last_rate[idx[r]] = np.where(moved[r], rate[r], self._last_rate[idx[r]])
                self._last_fec[idx[r], 0] = np.where(k[r] > 0, k[r], self._last_fec[idx[r], 0])
                self._last_fec[idx[r], 1] = np.where(k[r] > 0, m[r], self._last_fec[idx[r], 1])
        if sent_rows:
            self.last_sent = np.concatenate(sent_rows)
            self.last_sent_ns = int(self.clock_ns())
        return sent
