"""Send rate/FEC feedback records to the senders' host agents over UDP.

The thin I/O shell around ``feedback.encode_feedback``: flows are grouped by
their agent's address, records are packed into datagrams of at most
``max_records`` (43 x 32 B fits a 1500-byte MTU), and a flow whose rate moved
by less than ``min_change_fraction`` since its last feedback (and whose FEC is
unchanged) is skipped, so steady flows cost nothing on the wire.

Agents answer each record with a confirmation (``formats.feedback.CONFIRM_DTYPE``)
sent back to this socket; ``receive_confirmations`` drains them without blocking
(``fileno`` lets a selector wake on them) and matches each to the flow row it was
sent for.  Agents that do not confirm cost nothing: no confirmation, no sample.
The socket is non-blocking both ways: a full send buffer drops that datagram and
counts it in ``send_errors`` rather than stalling the collector thread.
"""
from __future__ import annotations

import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Self

import numpy as np
import numpy.typing as npt

from common.auth import Signer, Verifier
from controller.cc.errors import FlowIndexError, ParameterError
from controller.cc.feedback import encode_feedback
from formats.feedback import CONFIRM_DTYPE, ConfirmStatus


@dataclass(slots=True, kw_only=True)
class SenderStats:
    datagrams: int = 0
    records: int = 0
    suppressed: int = 0
    send_errors: int = 0
    confirmations: dict[str, int] = field(default_factory=dict)
    """Confirmations matched to a record sent, by ``ConfirmStatus`` name."""
    confirm_unmatched: int = 0
    """Confirmations naming no record we remember (too old, or not ours)."""
    confirm_malformed: int = 0
    """Datagrams on the feedback socket that are not whole confirmation records."""


@dataclass(slots=True, kw_only=True)
class Confirmations:
    """Confirmations matched to the records they answer (one entry each)."""

    flow_idx: np.ndarray
    seq: np.ndarray
    sent_ns: np.ndarray
    """Our clock when the record was sent (echoed ``decided_ns``)."""
    received_ns: np.ndarray
    hold_ns: np.ndarray
    applied_psn: np.ndarray
    status: np.ndarray

    def __len__(self) -> int:
        return int(self.flow_idx.size)


@dataclass(slots=True, kw_only=True)
class FeedbackSender:
    """Per-flow agent addresses and last-sent values; ``send`` ships one round."""

    n_flows: int
    min_change_fraction: float = 0.01
    max_records: int = 43
    log_capacity: int = 1 << 16
    """Records remembered (by ``seq``) to match confirmations; a power of two."""
    clock_ns: Callable[[], int] = time.monotonic_ns
    signer: Signer | None = None
    """Seal every feedback datagram (``formats.auth``, kind FEEDBACK)."""
    verifier: Verifier | None = None
    """Take only sealed confirmations (kind CONFIRM); refusals counted by reason there."""
    stats: SenderStats = field(default_factory=SenderStats)
    _sock: socket.socket | None = field(init=False, default=None, repr=False)
    _agent: list[tuple[str, int] | None] = field(init=False, repr=False)
    _flow_id: np.ndarray = field(init=False, repr=False)
    _last_rate: np.ndarray = field(init=False, repr=False)
    _last_fec: np.ndarray = field(init=False, repr=False)
    _seq: int = field(init=False, default=0)
    _log_seq: np.ndarray = field(init=False, repr=False)
    _log_row: np.ndarray = field(init=False, repr=False)
    last_sent: np.ndarray = field(init=False, repr=False)
    """Flow rows that got a record in the last ``send`` call."""
    last_seq: np.ndarray = field(init=False, repr=False)
    """The ``seq`` of each of those records."""
    last_sent_ns: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        if self.n_flows <= 0:
            raise ParameterError(f"FeedbackSender.n_flows = {self.n_flows} must be positive")
        if not 0 <= self.min_change_fraction < 1:
            raise ParameterError(
                f"FeedbackSender.min_change_fraction = {self.min_change_fraction} not in [0, 1)")
        if not 1 <= self.max_records <= 2000:
            raise ParameterError(f"FeedbackSender.max_records = {self.max_records} not in 1..2000")
        if self.log_capacity <= 0 or self.log_capacity & (self.log_capacity - 1):
            raise ParameterError(
                f"FeedbackSender.log_capacity = {self.log_capacity} must be a power of two")
        self._log_seq = np.full(self.log_capacity, -1, dtype=np.int64)
        self._log_row = np.zeros(self.log_capacity, dtype=np.int64)
        self.last_seq = np.zeros(0, dtype=np.int64)
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

    @property
    def sock(self) -> socket.socket:
        """The UDP socket feedback leaves from and confirmations come back to
        (opened on first use, non-blocking)."""
        if self._sock is None:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            self._sock.setblocking(False)
        return self._sock

    def fileno(self) -> int:
        """For selectors: readable when confirmations are waiting."""
        return self.sock.fileno()

    def receive_confirmations(self, max_datagrams: int = 1024) -> Confirmations:
        """Drain confirmations (non-blocking) and match them to the records sent."""
        bufs: list[bytes] = []
        sock = self.sock
        size = CONFIRM_DTYPE.itemsize
        for _ in range(max_datagrams):
            try:
                data = sock.recv(65535)
            except (BlockingIOError, InterruptedError):
                break
            except OSError:   # e.g. ICMP port unreachable from an agent that is gone
                continue
            if self.verifier is not None:
                opened = self.verifier.open(data)
                if opened is None:
                    continue
                data = opened.payload
            if not data or len(data) % size:
                self.stats.confirm_malformed += 1
                continue
            bufs.append(data)
        now = int(self.clock_ns())
        rec = np.frombuffer(b"".join(bufs), CONFIRM_DTYPE)
        seq = rec["seq"].astype(np.int64)
        slot = seq & (self.log_capacity - 1)
        row = self._log_row[slot]
        ok = (self._log_seq[slot] == seq) & (self._flow_id[row] == rec["flow_id"])
        self.stats.confirm_unmatched += int(ok.size - ok.sum())
        rec, seq, row = rec[ok], seq[ok], row[ok]
        status = rec["status"].astype(np.int64)
        for code, count in zip(*np.unique(status, return_counts=True), strict=True):
            try:
                name = ConfirmStatus(int(code)).name
            except ValueError:
                name = f"status_{int(code)}"
            self.stats.confirmations[name] = self.stats.confirmations.get(name, 0) + int(count)
        return Confirmations(flow_idx=row, seq=seq,
                             sent_ns=rec["decided_ns"].astype(np.int64),
                             received_ns=np.full(row.size, now, dtype=np.int64),
                             hold_ns=rec["hold_ns"].astype(np.int64),
                             applied_psn=rec["applied_psn"].astype(np.int64), status=status)

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

    def send_flags(self, flow_idx: npt.ArrayLike, flags: int) -> int:
        """A record carrying only ``flags`` (rate and FEC unchanged) to each bound flow of
        ``flow_idx``, whatever was sent before: e.g. ``FLAG_PATH_CHANGED`` after a
        reroute.  Returns the records sent."""
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        return self.send(idx, np.nan, flags=flags, always=True)

    def bound_flows(self) -> np.ndarray:
        """The flow rows that have an agent (feedback can reach them)."""
        return np.asarray([i for i, a in enumerate(self._agent) if a is not None], dtype=np.int64)

    def send(self, flow_idx: npt.ArrayLike, rate_bps: npt.ArrayLike, *,
             fec_k: npt.ArrayLike = 0, fec_m: npt.ArrayLike = 0,
             flags: npt.ArrayLike = 0, always: bool = False) -> int:
        """Send what changed among ``flow_idx`` (``always``: every bound one); returns
        the number of records sent.

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
        go = (moved | fec_changed | always) & bound
        self.stats.suppressed += int(idx.size - go.sum())
        sel = np.flatnonzero(go)
        self.last_sent = np.zeros(0, dtype=np.int64)
        self.last_seq = np.zeros(0, dtype=np.int64)
        if sel.size == 0:
            return 0
        sock = self.sock
        now = int(self.clock_ns())
        by_agent: dict[tuple[str, int], list[int]] = {}
        for j in sel:  # group by destination: one dict entry per agent, not per packet
            by_agent.setdefault(self._agent[idx[j]], []).append(int(j))  # type: ignore[arg-type]
        sent = 0
        sent_rows: list[np.ndarray] = []
        sent_seqs: list[np.ndarray] = []
        for agent, rows_list in by_agent.items():
            rows = np.asarray(rows_list)
            for start in range(0, rows.size, self.max_records):
                r = rows[start:start + self.max_records]
                seq = (self._seq + np.arange(r.size, dtype=np.int64)) & 0xFFFFFFFF
                self._seq = (self._seq + r.size) & 0xFFFFFFFF
                buf = encode_feedback(flow_id=self._flow_id[idx[r]], seq=seq, decided_ns=now,
                                      rate_bps=np.where(moved[r], rate[r], 0.0),
                                      fec_k=k[r], fec_m=m[r], flags=fl[r])
                if self.signer is not None:
                    buf = self.signer.seal(buf)
                try:
                    sock.sendto(buf, agent)
                except OSError:
                    self.stats.send_errors += 1
                    continue
                slot = seq & (self.log_capacity - 1)
                self._log_seq[slot] = seq
                self._log_row[slot] = idx[r]
                sent_seqs.append(seq)
                self.stats.datagrams += 1
                self.stats.records += int(r.size)
                sent += int(r.size)
                sent_rows.append(idx[r])
                self._last_rate[idx[r]] = np.where(moved[r], rate[r], self._last_rate[idx[r]])
                self._last_fec[idx[r], 0] = np.where(k[r] > 0, k[r], self._last_fec[idx[r], 0])
                self._last_fec[idx[r], 1] = np.where(k[r] > 0, m[r], self._last_fec[idx[r], 1])
        if sent_rows:
            self.last_sent = np.concatenate(sent_rows)
            self.last_seq = np.concatenate(sent_seqs)
            self.last_sent_ns = int(self.clock_ns())
        return sent
