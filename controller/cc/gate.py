"""Commit gate: HPCC's reference rate commits only on telemetry of the last committed rate.

Why: HPCC reacts to every sample (fast react) but commits its reference rate Rc once
per round, and a round must see the effect of the previous commit, otherwise one
queue is counted several times and the decreases compound.  The ns-3 model does this
with ``lastUpdateSeq``: after a commit, the next one waits for an ACK of a packet
sent after it.  The controller sees PSNs in telemetry (REPORT_DTYPE ``psn``) instead
of ACKs, and learns where the new rate took effect from the agent's confirmation
(``formats.feedback.CONFIRM_DTYPE.applied_psn``: the requester's next PSN when the
rate was applied).  Telemetry reaches the controller in batches, so without this a
batch of samples taken before the sender applied a decision could commit again on
the same queue.

Per flow:

* a committed decision sent to an agent that confirms (``arm``) closes the gate;
* the confirmation gives the PSN (``confirm``); the first sample whose BTH PSN is at
  or after it (24-bit, modulo 2^24, within half the space) opens the gate again, and
  the once-per-T time rule applies from that sample on;
* samples before it still set the rate (fast react) but never commit;
* fallbacks, after which the time-based commit resumes: no confirmation within
  ``confirm_timeout_s`` of the send (lost datagram, agent or endpoint without
  confirmations; the flow is then not gated again until a confirmation arrives), no
  fresh sample within ``fresh_timeout_s`` (e.g. a sender restarted with a new PSN
  space), or a confirmation saying the rate was not applied;
* a commit whose record was not sent (the rate barely moved, ``FeedbackSender``'s
  ``min_change_fraction``, or no agent) does not close the gate: the telemetry in
  flight was already taken at that rate.

At most one commit per flow and batch (``HpccEngine.update`` with ``commit_mask``):
a batch shares one arrival time, so the once-per-T rule allows no more, and a gated
flow closes at its commit.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from controller.cc.errors import FlowIndexError, ParameterError, TelemetryError

PSN_MODULUS = 1 << 24
SEQ_MODULUS = 1 << 32


def psn_at_or_after(psn: npt.ArrayLike, ref: npt.ArrayLike) -> np.ndarray:
    """True where 24-bit ``psn`` is ``ref`` or up to 2^23 - 1 after it (modulo 2^24)."""
    d = (np.asarray(psn, dtype=np.int64) - np.asarray(ref, dtype=np.int64)) % PSN_MODULUS
    return d < PSN_MODULUS // 2


def seq_at_or_after(seq: npt.ArrayLike, ref: npt.ArrayLike) -> np.ndarray:
    """The same for 32-bit feedback sequence numbers."""
    d = (np.asarray(seq, dtype=np.int64) - np.asarray(ref, dtype=np.int64)) % SEQ_MODULUS
    return d < SEQ_MODULUS // 2


@dataclass(frozen=True, slots=True, kw_only=True)
class GateParams:
    """Timeouts of the gate (seconds of telemetry arrival time)."""

    enabled: bool = True
    """False: never close the gate (the plain once-per-T commit)."""
    confirm_timeout_s: float = 0.05
    """Wait at most this long after a commit for the agent's confirmation."""
    fresh_timeout_s: float = 0.5
    """Wait at most this long after a commit for a sample at the applied PSN."""

    def __post_init__(self) -> None:
        if not 0 < self.confirm_timeout_s <= self.fresh_timeout_s:
            raise ParameterError(
                f"GateParams.confirm_timeout_s = {self.confirm_timeout_s} must be in "
                f"(0, fresh_timeout_s = {self.fresh_timeout_s}]")
        if not self.fresh_timeout_s <= 60:
            raise ParameterError(f"GateParams.fresh_timeout_s = {self.fresh_timeout_s} > 60 s")


@dataclass(slots=True, kw_only=True)
class GateStats:
    """What the gate did (counts of flow events)."""

    armed: int = 0
    """Commits sent to a confirming agent: the flow waited for fresh telemetry."""
    held: int = 0
    """Batches in which a flow was due by time but only had stale samples."""
    released_fresh: int = 0
    """Gates opened by a sample at or after the applied PSN."""
    released_not_applied: int = 0
    """Gates opened by a confirmation saying the rate was not applied."""
    timeouts_confirm: int = 0
    timeouts_fresh: int = 0


@dataclass(slots=True, kw_only=True)
class CommitGate:
    """Per-flow gate state over the engine's rows; see the module docstring."""

    n_flows: int
    params: GateParams = field(default_factory=GateParams)
    stats: GateStats = field(default_factory=GateStats)
    armed: np.ndarray = field(init=False, repr=False)
    confirming: np.ndarray = field(init=False, repr=False)
    """The flow's agent confirmed a record applied (and none failed since)."""
    wait_seq: np.ndarray = field(init=False, repr=False)
    applied_psn: np.ndarray = field(init=False, repr=False)
    """-1 until the confirmation of ``wait_seq`` (or a later record) arrived."""
    armed_ns: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.n_flows <= 0:
            raise ParameterError(f"CommitGate.n_flows = {self.n_flows} must be positive")
        n = self.n_flows
        self.armed = np.zeros(n, dtype=bool)
        self.confirming = np.zeros(n, dtype=bool)
        self.wait_seq = np.zeros(n, dtype=np.int64)
        self.applied_psn = np.full(n, -1, dtype=np.int64)
        self.armed_ns = np.zeros(n, dtype=np.int64)

    def reset(self, flow_idx: npt.ArrayLike) -> None:
        """A new flow in these rows: open, not known to confirm."""
        idx = self._idx(flow_idx, "reset")
        self.armed[idx] = False
        self.confirming[idx] = False
        self.applied_psn[idx] = -1

    # ------------------------------------------------------------------ per batch
    def commit_mask(self, flow_idx: npt.ArrayLike, *, psn: npt.ArrayLike,
                    has_psn: npt.ArrayLike, arrival_ns: npt.ArrayLike,
                    last_commit_ns: np.ndarray, base_rtt_ns: np.ndarray) -> np.ndarray:
        """Rows of a batch (in batch order) allowed to commit: every row of an open flow,
        and of a waiting flow the rows from its first fresh sample on (or from a
        timeout).  Pass it as ``HpccEngine.update(commit_mask=)``, which commits at most
        once per flow and call, where the once-per-T rule allows.  ``last_commit_ns``
        and ``base_rtt_ns`` (the engine's per-flow arrays) only feed ``stats.held``.
        Updates the gate (releases)."""
        f = self._idx(flow_idx, "commit_mask")
        n = f.size
        p = np.asarray(psn, dtype=np.int64).ravel()
        hp = np.asarray(has_psn, dtype=bool).ravel()
        t = np.asarray(arrival_ns, dtype=np.int64).ravel()
        if not p.shape == hp.shape == t.shape == (n,):
            raise TelemetryError(f"CommitGate.commit_mask: psn {p.shape}, has_psn {hp.shape}, "
                                 f"arrival_ns {t.shape} must all be ({n},)")
        if n == 0:
            return np.zeros(0, dtype=bool)
        is_open = np.ones(n, dtype=bool)
        armed = self.armed[f]
        if armed.any():
            since = t - self.armed_ns[f]
            applied = self.applied_psn[f]
            unconfirmed = applied < 0
            late_confirm = unconfirmed & (since >= int(self.params.confirm_timeout_s * 1e9))
            late_fresh = since >= int(self.params.fresh_timeout_s * 1e9)
            fresh = ~unconfirmed & hp & psn_at_or_after(p, applied)
            release = armed & (fresh | late_confirm | late_fresh)
            pos = np.flatnonzero(release)
            rel_flow, first = np.unique(f[pos], return_index=True)
            rel_pos = pos[first]
            open_from = np.full(self.n_flows, n, dtype=np.int64)
            open_from[rel_flow] = rel_pos
            is_open = ~armed | (np.arange(n) >= open_from[f])
            # state: released flows open for good; count why
            self.armed[rel_flow] = False
            by_fresh = fresh[rel_pos]
            by_confirm = ~by_fresh & late_confirm[rel_pos]
            self.stats.released_fresh += int(by_fresh.sum())
            self.stats.timeouts_confirm += int(by_confirm.sum())
            self.stats.timeouts_fresh += int((~by_fresh & ~by_confirm).sum())
            # no confirmation at all: this flow's agent does not confirm (for now)
            self.confirming[rel_flow[by_confirm]] = False
        held = ~is_open & ((t - last_commit_ns[f]) >= base_rtt_ns[f])
        if held.any():
            self.stats.held += int(np.unique(f[held]).size)
        return is_open

    def arm(self, flow_idx: npt.ArrayLike, seq: npt.ArrayLike, now_ns: int) -> None:
        """Committed decisions of ``flow_idx`` went out as feedback ``seq``: flows whose
        agent confirms wait for fresh telemetry."""
        idx = self._idx(flow_idx, "arm")
        s = np.asarray(seq, dtype=np.int64).ravel()
        if s.shape != idx.shape:
            raise TelemetryError(f"CommitGate.arm: seq {s.shape} != flow_idx {idx.shape}")
        if not self.params.enabled:
            return
        go = self.confirming[idx]
        idx, s = idx[go], s[go]
        self.armed[idx] = True
        self.wait_seq[idx] = s
        self.applied_psn[idx] = -1
        self.armed_ns[idx] = now_ns
        self.stats.armed += int(idx.size)

    def confirm(self, flow_idx: npt.ArrayLike, seq: npt.ArrayLike, applied_psn: npt.ArrayLike,
                applied: npt.ArrayLike) -> None:
        """Confirmations from the agents (one per feedback record): ``applied`` False
        means the sender kept its old setting."""
        idx = self._idx(flow_idx, "confirm")
        s = np.asarray(seq, dtype=np.int64).ravel()
        psn = np.asarray(applied_psn, dtype=np.int64).ravel()
        ok = np.asarray(applied, dtype=bool).ravel()
        if not idx.shape == s.shape == psn.shape == ok.shape:
            raise TelemetryError("CommitGate.confirm: flow_idx, seq, applied_psn and applied "
                                 "must have one value per confirmation")
        if idx.size == 0:
            return
        self.confirming[idx[ok]] = True
        self.confirming[idx[~ok]] = False
        waiting = self.armed[idx] & seq_at_or_after(s, self.wait_seq[idx])
        failed = waiting & ~ok
        if failed.any():
            rows = np.unique(idx[failed])
            self.armed[rows] = False
            self.stats.released_not_applied += int(rows.size)
        hit = np.flatnonzero(waiting & ok & (self.applied_psn[idx] < 0) & self.armed[idx])
        if hit.size:
            # the earliest confirmed record at or after the one waited for, per flow
            dist = (s[hit] - self.wait_seq[idx[hit]]) % SEQ_MODULUS
            order = np.lexsort((dist, idx[hit]))
            rows, first = np.unique(idx[hit][order], return_index=True)
            self.applied_psn[rows] = psn[hit][order][first] % PSN_MODULUS

    def _idx(self, flow_idx: npt.ArrayLike, where: str) -> np.ndarray:
        idx = np.asarray(flow_idx, dtype=np.int64).ravel()
        if idx.size and (idx.min() < 0 or idx.max() >= self.n_flows):
            bad = int(idx[(idx < 0) | (idx >= self.n_flows)][0])
            raise FlowIndexError(
                f"CommitGate.{where}: flow index {bad} outside 0..{self.n_flows - 1}")
        return idx
