"""Per-message loss recovery: which scheme a message is sent with, and its FEC layout.

Why per message: a lossy WAN path loses packets in bursts, and what a message feels is
its completion time.  Plain selective repeat (SR) pays a round trip (or a timeout, when
the tail is lost) for every message that loses a packet; FEC pays repair bytes on every
message.  Which is cheaper depends on the path's loss model, the round trip, the rate
and the message size, all of which change, so the sender decides for each message from
what it knows at the time (the controller's loss-map feedback, its own RTT and
counters), data-plane free.

The decision (:func:`choose`) compares candidates by an expected cost in seconds::

    cost = 2 x (data + repair packets) x packet time + mean(delay) + mean of the worst eps(delay)

where ``delay`` is how late a message finishes on each of :data:`MC_TRIALS` sampled
loss patterns of the path (:class:`Outcome`, :func:`outcome`; a Gilbert-Elliott chain,
independent loss as its one-state case): nothing when every block decodes, else the
round trip from the moment the sender can know of the last failure, less the wire time
still ahead of the message then, plus two timeouts when a resent packet is lost
again (on the chain, where a busy link has carried a round trip of packets since the
loss: :func:`again_curve`).  Selective repeat knows of a loss one packet later, so
early losses hide behind the rest of the message; a coded block's loss is declared only after its repairs were
reported, so a failed block at the end of a long interleaved group costs a full round
trip, and more where only the next message's packets can reveal it.  The cost is the
mean FCT (what goodput feels) plus the mean FCT of the worst ``eps`` of messages (a
smooth p99), so wire time counts twice.  Repair packets are capped at
``overhead_floor + overhead_per_loss x loss rate`` of the data; where the QP is
window-bound (what it has posted does not fill the path's bandwidth-delay product, so
the link idles every round trip) the loss rate counts once per ``burst_pkts`` of the
mean burst too, up to ``max_overhead_idle``: a block must absorb a whole burst, and the
repairs ride in time the link would leave idle.  Candidates:

- ``sr``: no repair symbols; every loss costs a round trip.
- ``tail``: SR for the body, the last ``T`` packets in one block with ``m`` repairs sent
  right behind them (a lost tail costs no timeout).
- ``fec``: the whole message in interleaved groups: ``depth`` blocks of ``k`` data
  symbols whose members are ``depth`` packets apart (block of position ``i`` is
  ``i mod depth``), their ``m`` repairs each sent behind the group in the same round
  robin, so a burst of up to ``depth x m`` consecutive packets costs each block at most
  ``m`` symbols.  Residual losses fall back to SR.

The interface to an endpoint is :class:`MessagePlan`: a list of :class:`Group` (which
packets of the message, how many blocks interleaved, how many repairs per block).  The
Python requester (:mod:`traffic.requester`) executes it, and so does the native engine
(its requester proxy, :class:`traffic.native_endpoint.NativeRequester`, decides here and
hands each message's groups to ``tn_post_write_plan``), so mode auto runs on either
endpoint.  The decision lives here, above both.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from common.loss import LossKind, LossModel
from traffic.errors import ConfigError

__all__ = ["MAX_DEPTH", "MAX_GROUP", "Group", "LossEstimator", "MessagePlan", "Outcome",
           "PathView", "PlanPrediction", "PolicyConfig", "again_curve", "block_fail",
           "block_members", "choose", "fixed_plan", "is_window_bound", "make_view", "outcome",
           "plan_cost", "plan_groups", "plan_label", "predictions", "repair_cap", "repair_order",
           "resend_gap", "rtt_grid", "scheme_counts", "tail_mean", "view_rto", "warm"]

MAX_DEPTH = 16
"""Most blocks interleaved in one group (the stride of a block's members)."""
MAX_GROUP = 512
"""Most data packets in one group (the receiver keeps twice this many symbols)."""


@dataclass(frozen=True, slots=True)
class Group:
    """``count`` consecutive data packets of a message (from packet ``first``) coded as
    ``blocks`` interleaved blocks with ``m`` repair symbols each."""

    first: int
    count: int
    blocks: int
    m: int

    @property
    def repairs(self) -> int:
        return self.blocks * self.m


@dataclass(frozen=True, slots=True)
class MessagePlan:
    """How one message is protected, and why (shown in the run's summary)."""

    scheme: str  # "sr" | "tail" | "fec"
    k: int = 0
    m: int = 0
    depth: int = 1
    tail_pkts: int = 0
    groups: tuple[Group, ...] = ()
    p_retx: float = 0.0  # probability the message still needs a retransmission
    reason: str = ""

    @property
    def repair_pkts(self) -> int:
        return sum(g.repairs for g in self.groups)

    @property
    def label(self) -> str:
        return plan_label(self.scheme, k=self.k, m=self.m, depth=self.depth,
                          tail_pkts=self.tail_pkts)

    def as_dict(self, n_pkts: int) -> dict:
        return {"scheme": self.scheme, "k": self.k, "m": self.m, "depth": self.depth,
                "tail_pkts": self.tail_pkts, "repair_pkts": self.repair_pkts,
                "overhead": round(self.repair_pkts / max(1, n_pkts), 4),
                "p_retx": round(self.p_retx, 5), "reason": self.reason}


def plan_label(scheme: str, *, k: int = 0, m: int = 0, depth: int = 1,
               tail_pkts: int = 0) -> str:
    """How summaries and tables name a plan: ``sr``, ``tail(16,2)`` (the last 16 packets,
    2 repairs) or ``fec(64,10)x4`` (blocks of 64 with 10 repairs, 4 interleaved)."""
    if scheme == "fec":
        return f"fec({k},{m})x{depth}"
    if scheme == "tail":
        return f"tail({tail_pkts},{m})"
    return scheme


# -- layout ------------------------------------------------------------------------------
def plan_groups(n: int, *, k: int, m: int, depth: int, first: int = 0) -> tuple[Group, ...]:
    """Groups covering packets ``first .. n-1`` with blocks of at most ``k`` and up to
    ``depth`` of them interleaved (a short last group gets fewer blocks, still <= k)."""
    if not (1 <= k and 1 <= depth <= MAX_DEPTH and k * depth <= MAX_GROUP and m >= 0):
        raise ConfigError(f"FEC layout: k={k}, depth={depth}, m={m} outside k >= 1, "
                          f"1 <= depth <= {MAX_DEPTH}, k x depth <= {MAX_GROUP}")
    out = []
    pos = first
    while pos < n:
        g = min(n - pos, k * depth)
        out.append(Group(first=pos, count=g, blocks=min(depth, -(-g // k)), m=m))
        pos += g
    return tuple(out)


def block_members(group: Group, j: int) -> range:
    """Packet indices (within the message) of block ``j`` of ``group``."""
    return range(group.first + j, group.first + group.count, group.blocks)


def repair_order(group: Group) -> list[tuple[int, int]]:
    """(block, repair index) in sending order: position ``count + t`` of the group's
    stream carries a repair of block ``(count + t) mod blocks``, so every block's
    symbols stay ``blocks`` positions apart across the data/repair boundary too."""
    b = group.blocks
    return [((group.count + t) % b, t // b) for t in range(b * group.m)]


def fixed_plan(n: int, k: int, m: int, depth: int = 1, reason: str = "fixed") -> MessagePlan:
    """A plan with a fixed code (``m`` = 0: plain SR)."""
    if m == 0:
        return MessagePlan(scheme="sr", reason=reason)
    return MessagePlan(scheme="fec", k=k, m=m, depth=depth,
                       groups=plan_groups(n, k=k, m=m, depth=depth), reason=reason)


# -- loss arithmetic ---------------------------------------------------------------------
def _chain(model: LossModel) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(stationary distribution, transition matrix, loss probability) per state."""
    if model.kind is LossKind.GILBERT_ELLIOTT and model.p + model.r > 0:
        t = np.array([[1 - model.p, model.p], [model.r, 1 - model.r]])
        pi = np.array([model.r, model.p]) / (model.p + model.r)
        return pi, t, np.array([1 - model.k, 1 - model.h])
    q = model.mean_loss
    return np.array([1.0, 0.0]), np.eye(2), np.array([q, q])


@functools.lru_cache(maxsize=8192)
def block_fail(model: LossModel, n: int, m: int, spacing: int = 1) -> float:
    """P(more than ``m`` of ``n`` symbols lost) when they are ``spacing`` packets apart
    on a path of ``model`` (binomial for independent loss; else a forward recursion
    over the chain's two states, in plain floats: the arrays are tiny)."""
    q = model.mean_loss
    if q <= 0 or n <= m:
        return 0.0
    if model.kind is not LossKind.GILBERT_ELLIOTT or model.p + model.r <= 0:
        return max(0.0, 1.0 - sum(math.comb(n, i) * q**i * (1 - q) ** (n - i)
                                  for i in range(m + 1)))
    pi, t, loss = _chain(model)
    step = np.linalg.matrix_power(t, spacing)
    gg, gb, bg, bb = float(step[0, 0]), float(step[0, 1]), float(step[1, 0]), float(step[1, 1])
    lg, lb = float(loss[0]), float(loss[1])
    good = [0.0] * (m + 2)  # P(state, losses so far); the last slot: more than m
    bad = [0.0] * (m + 2)
    good[0], bad[0] = float(pi[0]), float(pi[1])
    for i in range(n):
        if i:
            good, bad = ([g * gg + b * bg for g, b in zip(good, bad)],
                         [g * gb + b * bb for g, b in zip(good, bad)])
        good = _absorb(good, lg)
        bad = _absorb(bad, lb)
    return float(min(1.0, max(0.0, good[-1] + bad[-1])))


def _absorb(dist: list[float], lost: float) -> list[float]:
    """One symbol sent in a state losing it with probability ``lost``."""
    kept = [x * (1 - lost) for x in dist]
    for c in range(len(dist) - 1, 0, -1):
        kept[c] += dist[c - 1] * lost
    kept[-1] += dist[-1] * lost
    return kept


def plan_p_retx(model: LossModel, n: int, groups: tuple[Group, ...]) -> float:
    """P(the message needs a retransmission): some block fails, or (outside the groups)
    some packet is lost.

    Independent loss: exact (blocks are independent).  Gilbert-Elliott: one burst hits
    neighbouring blocks and pieces of the message together, so multiplying per-block
    survival would overstate failure for every coded plan; the plan is instead played
    against :data:`MC_TRIALS` sampled loss patterns of the chain, the same patterns for
    every plan of a message size (their differences are what the choice needs).
    """
    if model.kind is LossKind.GILBERT_ELLIOTT and model.p + model.r > 0:
        return _sampled_p_retx(model, n, groups)
    ok = 1.0
    covered = 0
    for g in groups:
        covered += g.count
        for j in range(g.blocks):
            c = len(block_members(g, j))
            ok *= 1.0 - block_fail(model, c + g.m, g.m, g.blocks)
    bare = n - covered
    if bare > 0:
        ok *= 1.0 - block_fail(model, bare, 0, 1)
    return 1.0 - ok


MC_TRIALS = 4000


@functools.lru_cache(maxsize=32)
def _chain_sample(model: LossModel, length: int, seed: int = 1) -> np.ndarray:
    """(MC_TRIALS, length) losses of the chain from its stationary state, one row a trial."""
    rng = np.random.default_rng(seed)
    pi, _t, loss = _chain(model)
    bad = rng.random(MC_TRIALS) < pi[1]
    u = rng.random((length, MC_TRIALS))
    v = rng.random((length, MC_TRIALS))
    out = np.empty((length, MC_TRIALS), dtype=bool)
    for i in range(length):
        if i:
            bad = np.where(bad, u[i] >= model.r, u[i] < model.p)
        out[i] = v[i] < np.where(bad, loss[1], loss[0])
    return np.ascontiguousarray(out.T)


def _stream(n: int, groups: tuple[Group, ...]) -> tuple[list[int], list[list[int]], list[int]]:
    """Stream positions: bare data packets, and per block (all groups) its data and
    repair positions, with each block's m; repairs follow their group's last packet."""
    pos_of = list(range(n))
    blocks: list[list[int]] = []
    ms: list[int] = []
    covered: set[int] = set()
    extra = 0
    ends = {g.first + g.count - 1: g for g in groups}
    for i in range(n):
        pos_of[i] = i + extra
        g = ends.get(i)
        if g is not None:
            extra += g.repairs
    for g in groups:
        start = pos_of[g.first + g.count - 1] + 1
        members: list[list[int]] = [[pos_of[i] for i in block_members(g, j)]
                                    for j in range(g.blocks)]
        for t, (j, _r) in enumerate(repair_order(g)):
            members[j].append(start + t)
        blocks += members
        ms += [g.m] * g.blocks
        covered.update(range(g.first, g.first + g.count))
    bare = [pos_of[i] for i in range(n) if i not in covered]
    return bare, blocks, ms


def _sampled_p_retx(model: LossModel, n: int, groups: tuple[Group, ...]) -> float:
    bare, blocks, ms = _stream(n, groups)
    need = n + sum(g.repairs for g in groups)
    length = n + n // 4 + 64
    sample = _chain_sample(model, max(length, need))
    fail = np.zeros(MC_TRIALS, dtype=bool)
    if bare:
        fail |= sample[:, bare].any(axis=1)
    for cols, m in zip(blocks, ms, strict=True):
        fail |= sample[:, cols].sum(axis=1) > m
    return float(fail.mean())


# -- what a failure costs ------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Outcome:
    """A plan played against the sampled loss patterns of its path (one entry a trial).

    Why per trial: what a message feels is not whether it needs a retransmission but
    when the sender can know it.  Selective repeat learns of a loss from the next
    packet's acknowledgement, so a loss early in a message is resent while the rest is
    still on the wire and costs little; a coded block's loss is only declared after its
    repairs were reported (the receiver had its chance), so a failed block at the end of
    an interleaved group costs a full round trip behind the message.  (The requesters
    resend sooner where a block's data alone lost more than its repairs; the model keeps
    counting such a failure at the block's end, an upper bound: priced at the loss that
    shows it, the policy took lighter codes that measured no better, presets README
    "Runs W-Y".)
    """

    stream: int
    """Packets on the wire (data and repairs)."""
    slack: np.ndarray
    """Packets sent after the last failure became detectable (-1: nothing to resend)."""
    resent: np.ndarray
    """Data packets left to selective repeat."""
    blind: np.ndarray
    """True where no data packet of the message follows the last failure's detection
    point: only the next message's packets (or a timeout) reveal it."""

    def penalty(self, *, rtt_s: float, t_pkt_s: float, again: np.ndarray, rto_s: float,
                follow_s: float) -> np.ndarray:
        """Seconds each trial's message finishes late: the round trip from the last
        detectable failure not hidden behind the rest of the message (plus ``follow_s``
        waiting for the next message where the message itself cannot reveal it), and
        two timeouts (the timer backs off) when one of the resent packets is lost
        again (``again[r]``: the chance for ``r`` resent packets, :func:`again_curve`):
        a resent packet lost in a burst is seen by the timer, not by order."""
        late = np.maximum(0.0, rtt_s - self.slack * t_pkt_s) + np.where(self.blind, follow_s, 0)
        return np.where(self.slack >= 0, late + again[self.resent] * 2 * rto_s, 0.0)


def outcome(model: LossModel, n: int, groups: tuple[Group, ...]) -> Outcome:
    """The plan's :class:`Outcome` on :data:`MC_TRIALS` loss patterns of ``model``
    (the same patterns for every plan of a message size)."""
    bare, blocks, ms = _stream(n, groups)
    stream = n + sum(g.repairs for g in groups)
    sample = _chain_sample(model, max(n + n // 4 + 64, stream))
    detect = np.full(MC_TRIALS, -1, dtype=np.int64)
    resent = np.zeros(MC_TRIALS, dtype=np.int64)
    last_data = max(bare + [c for cols, nd in zip(blocks, _data_counts(groups), strict=True)
                            for c in cols[:nd]])
    if bare:
        lost = sample[:, bare]
        where = np.asarray(bare, dtype=np.int64)
        detect = np.maximum(detect, np.where(lost, where, -1).max(axis=1))
        resent += lost.sum(axis=1)
    for cols, m, nd in zip(blocks, ms, _data_counts(groups), strict=True):
        lost = sample[:, cols]
        fail = lost.sum(axis=1) > m
        if fail.any():
            detect = np.where(fail, np.maximum(detect, max(cols)), detect)
            resent += np.where(fail, lost[:, :nd].sum(axis=1), 0)
    slack = np.where(detect >= 0, stream - 1 - detect, -1)
    return Outcome(stream=stream, slack=slack, resent=resent,
                   blind=(detect >= 0) & (detect >= last_data))


def _data_counts(groups: tuple[Group, ...]) -> list[int]:
    """Data members of every block, in :func:`_stream`'s order."""
    return [len(block_members(g, j)) for g in groups for j in range(g.blocks)]


def tail_mean(x: np.ndarray, share: float) -> float:
    """Mean of the worst ``share`` of ``x`` (at least one value): a smooth percentile."""
    n = max(1, math.ceil(share * x.size))
    return float(np.partition(x, x.size - n)[x.size - n:].mean())


# -- the decision ------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class PolicyConfig:
    """The policy's knobs (defaults are the ones the wan_recovery preset measured)."""

    eps: float = 0.01
    """The tail the policy protects: the cost counts the mean delay of the worst ``eps``
    of messages (the p99 FCT) beside the mean delay (goodput)."""
    max_overhead: float = 0.25
    """Most repair packets per data packet a message may carry ..."""
    overhead_per_loss: float = 16.0
    overhead_floor: float = 0.01
    """... and at most ``overhead_floor + overhead_per_loss x loss rate`` of them: the
    bytes FEC adds stay in proportion to what selective repeat would resend."""
    k_choices: tuple[int, ...] = (8, 16, 32, 64, 128)
    """Data packets per block.  128 because a longer block carries more repairs for the
    same bytes: at 0.1 % loss within the 2.6 % cap, (64, 1) failed 0.8 % of 256-packet
    messages and set a 96-message run's p99 with a round trip, (128, 3) fails almost
    never (presets README, "Blocks of up to 128 data packets")."""
    depth_choices: tuple[int, ...] = (1, 2, 4, 8, 16)
    m_max: int = 16
    """Most repairs per block (the codec's and the engine's limit).  8 kept the policy
    below the loss map's own fixed code where random loss is dense: at 5 % the fixed
    (64, 9) beat every plan within 8 repairs on bytes, and (32, 8) cost 25 % repairs
    where (64, 12) costs 19 % for the same failure rate."""
    tail_choices: tuple[int, ...] = (4, 8, 16, 32)
    wire_weight: float = 2.0
    """Wire time counts in the mean and in the tail FCT (2), more where messages in
    flight queue behind each other's repairs."""
    min_gain: float = 0.005
    """A coded plan must cost this share less than plain SR to be chosen."""
    follow_wait_rtt: float = 0.5
    """How long (in round trips) a failure only the next message can reveal waits for
    that message's first packet (messages in flight leave the link idle between them
    when the round trip is longer than their wire time)."""
    tail_min_loss: float = 0.005
    """From this loss rate on, a message may always carry one tail repair (a short
    message would otherwise never be covered by the proportional bound)."""
    max_overhead_idle: float = 0.4
    """The cap where the QP is window-bound (:attr:`PathView.window_bound`) ..."""
    burst_pkts: float = 5.0
    """... where the proportional bound also grows with the mean burst length, per
    this many packets of it.  Why: at 1 % loss in bursts of 30 the bound (17 %) left
    every plan that spans a burst out, so auto sent plain SR and its p99 was SR's
    (runs K-P); 60 ms paths with two 256 KiB messages in flight leave the link idle
    for more than a third of each round trip, where 96 repairs a message cost little."""


@dataclass(frozen=True, slots=True)
class PathView:
    """What the sender knows about its path when it posts a message."""

    loss: LossModel
    rtt_s: float
    rate_bps: float
    wire_pkt_bytes: int = 1100
    source: str = "controller"  # where ``loss`` came from (controller | own counters)
    rto_s: float = 0.0
    """The QP's retransmission timeout (0: twice the round trip)."""
    window_bound: bool = False
    """The QP's posted, unacknowledged bytes (this message's included) are less than
    the rate times the round trip (:func:`is_window_bound`): the link idles every round
    trip, so the repair cap may grow with the burst length (:func:`repair_cap`)."""
    rtt_measured: bool = True
    """The QP has sampled its round trip (``rtt_s`` is no stand-in): only then does a
    QP that is not window-bound keep its link busy as far as anyone knows
    (:func:`resend_gap`)."""

    def quantised(self) -> PathView:
        """Two significant digits of the loss model and rate, times on a 25 % grid:
        decisions (and their cache) stand still while the telemetry only jitters (a
        smoothed RTT on a loaded host wanders by tens of percent, and every new value
        costs a decision on the critical path)."""
        lm = self.loss
        loss = LossModel(kind=lm.kind, p=_q(lm.p), r=_q(lm.r), h=_q(lm.h), k=1 - _q(1 - lm.k))
        return PathView(loss=loss, rtt_s=_qt(self.rtt_s), rate_bps=_q(self.rate_bps),
                        wire_pkt_bytes=self.wire_pkt_bytes, source=self.source,
                        rto_s=_qt(self.rto_s), window_bound=self.window_bound,
                        rtt_measured=self.rtt_measured)


def make_view(loss: LossModel, source: str, *, rtt_s: float, rate_bps: float,
              wire_pkt_bytes: int, rto_min_s: float, posted_pkts: int,
              rtt_measured: bool = True) -> PathView:
    """The view a requester decides from (both endpoints' ``path_view``): the timeout
    from the RTT alone (:func:`view_rto`), window-bound from what is posted
    (:func:`is_window_bound`), but only once the QP has measured its round trip
    (``rtt_measured``).

    Why not before: the RTT in its place is the initial timeout (50 ms), and a 20 ms
    path's first two messages were then decided window-bound and sent with the
    burst-sized repair cap (96 repairs a message at ge:1%/30), which the next two
    messages waited behind on a busy link (59 ms against SR's 45 in a sweep run)."""
    bound = rtt_measured and is_window_bound(posted_pkts, wire_pkt_bytes=wire_pkt_bytes,
                                             rate_bps=rate_bps, rtt_s=rtt_s)
    return PathView(loss=loss, rtt_s=rtt_s, rate_bps=rate_bps, wire_pkt_bytes=wire_pkt_bytes,
                    source=source, rto_s=view_rto(rto_min_s, rtt_s), window_bound=bound,
                    rtt_measured=rtt_measured)


def is_window_bound(posted_pkts: int, *, wire_pkt_bytes: int, rate_bps: float,
                    rtt_s: float) -> bool:
    """True when ``posted_pkts`` (posted and not yet acknowledged, the message being
    decided included) take less wire time than one round trip at the rate: the sender
    runs out of data before the first ACK returns, and the link idles until it does."""
    return posted_pkts * wire_pkt_bytes * 8 < rate_bps * rtt_s


def _q(x: float) -> float:
    return float(f"{x:.2g}")


def rtt_grid(lo: float, hi: float) -> list[float]:
    """The grid values of :meth:`PathView.quantised` from ``lo`` to ``hi`` seconds."""
    a, b = round(math.log(lo, 1.25)), round(math.log(hi, 1.25))
    return [float(f"{1.25 ** i:.4g}") for i in range(a, b + 1)]


def _qt(x: float) -> float:
    """``x`` on a geometric grid of 25 % steps (0 stays 0)."""
    return 0.0 if x <= 0 else float(f"{1.25 ** round(math.log(x, 1.25)):.4g}")


def view_rto(rto_min_s: float, rtt_s: float) -> float:
    """The timeout a lost retransmission costs in a :class:`PathView`, from the RTT alone
    (0: twice the RTT, the policy's default): the live RTO would make every decision
    depend on the RTT's variance too, and each new input costs a decision.

    The RTT is taken on the decision grid (:meth:`PathView.quantised`), as :func:`warm`
    takes it: compared raw, an RTT just above half the timer floor (the recovery sweep
    sets the floor to twice the path's RTT, so every smoothed RTT there is one) gave a
    view the warm-up had never decided, and the sender decided it on its loop, 28-50 ms
    after the message was due (a 60 ms path's third message took 115-128 ms, not 85)."""
    return rto_min_s if rto_min_s > 2 * _qt(rtt_s) else 0.0


def warm(view: PathView, sizes: Iterable[int], *, mtu: int, rto_min_s: float,
         cfg: PolicyConfig) -> None:
    """Decide for messages of these byte sizes now, at the view's RTT and at every round
    trip of the grid from 2 ms to 0.5 s, window-bound or not: later decisions come from
    the policy's cache while the loss telemetry stands still, whatever the RTT and the
    messages in flight do (both endpoints call this before their first message)."""
    npks = [max(1, -(-n // mtu)) for n in sizes]
    for n in npks:
        choose(view, n, cfg)
    for bound in (False, True):
        for rtt in rtt_grid(0.002, 0.5):
            v = replace(view, rtt_s=rtt, rto_s=view_rto(rto_min_s, rtt), window_bound=bound,
                        rtt_measured=True)  # what the QP will have measured
            for n in npks:
                choose(v, n, cfg)


def scheme_counts(messages: Iterable[Any]) -> dict[str, int]:
    """Messages per recovery scheme, from the ``extra["recovery"]`` of each message
    record (mode auto; a message without a plan counts as selective repeat)."""
    out: dict[str, int] = {}
    for m in messages:
        s = m.extra.get("recovery", {}).get("scheme", "sr")
        out[s] = out.get(s, 0) + 1
    return out


def choose(path: PathView, n_pkts: int, cfg: PolicyConfig = PolicyConfig()) -> MessagePlan:
    """The scheme for a message of ``n_pkts`` packets on ``path`` (see module docstring)."""
    if n_pkts < 1:
        raise ConfigError(f"recovery policy: a message of {n_pkts} packets")
    return _choose(path.quantised(), n_pkts, cfg)


def repair_cap(model: LossModel, cfg: PolicyConfig, window_bound: bool) -> float:
    """Most repair packets per data packet a message may carry (module docstring)."""
    burst = max(1.0, model.mean_burst_len / cfg.burst_pkts) if window_bound else 1.0
    top = cfg.max_overhead_idle if burst > 1 else cfg.max_overhead
    return min(top, cfg.overhead_floor + cfg.overhead_per_loss * model.mean_loss * burst)


@functools.lru_cache(maxsize=256)
def _candidates(model: LossModel, n: int, cfg: PolicyConfig,
                cap: float) -> tuple[tuple[MessagePlan, Outcome], ...]:
    """Every plan within the overhead bound, with its P(retx) and outcome (SR first).

    Why apart from the choice: the outcomes depend only on the loss model, the size
    and the repair cap (:func:`repair_cap`: paths whose caps agree, window-bound or not,
    share one sampling), the costs on the RTT and rate too; an RTT change then costs no
    new sampling.
    """
    q = model.mean_loss
    out = [(MessagePlan(scheme="sr", p_retx=plan_p_retx(model, n, ())), outcome(model, n, ()))]
    floor_pkts = 1 if q >= cfg.tail_min_loss else 0
    for t in sorted({min(t, n) for t in cfg.tail_choices}):
        for m in range(1, min(cfg.m_max, t) + 1):  # t repairs rebuild any t losses
            if m > max(cap * n, floor_pkts):
                break
            groups: tuple[Group, ...] = (Group(first=n - t, count=t, blocks=1, m=m),)
            out.append((MessagePlan(scheme="tail", m=m, tail_pkts=t, groups=groups,
                                    p_retx=plan_p_retx(model, n, groups)),
                        outcome(model, n, groups)))
    for k in cfg.k_choices:
        for depth in cfg.depth_choices:
            if k * depth > MAX_GROUP or (depth > 1 and k * (depth - 1) >= n):
                continue  # the interleaver would not fill more blocks
            for m in range(1, cfg.m_max + 1):
                groups = plan_groups(n, k=k, m=m, depth=depth)
                if sum(g.repairs for g in groups) / n > cap:
                    break
                p = plan_p_retx(model, n, groups)
                out.append((MessagePlan(scheme="fec", k=k, m=m, depth=depth, groups=groups,
                                        p_retx=p), outcome(model, n, groups)))
                if p < 1e-6:
                    break  # more repairs only cost bytes
    return tuple(out)


def plan_cost(path: PathView, plan_outcome: Outcome, cfg: PolicyConfig = PolicyConfig()
              ) -> float:
    """Seconds a plan costs a message: its mean FCT (what goodput feels) plus the mean
    FCT of its worst ``eps`` (the tail), each its wire time plus the delay its
    failures add."""
    t_pkt = path.wire_pkt_bytes * 8 / path.rate_bps
    again = again_curve(path.loss, resend_gap(path), int(plan_outcome.resent.max(initial=0)))
    pen = plan_outcome.penalty(rtt_s=path.rtt_s, t_pkt_s=t_pkt, again=again,
                               rto_s=path.rto_s or 2 * path.rtt_s,
                               follow_s=cfg.follow_wait_rtt * path.rtt_s)
    return (cfg.wire_weight * plan_outcome.stream * t_pkt + float(pen.mean())
            + tail_mean(pen, cfg.eps))


@functools.lru_cache(maxsize=256)
def _stacked(model: LossModel, n: int, cfg: PolicyConfig,
             cap: float) -> tuple[np.ndarray, ...]:
    """The candidates' outcomes as (plans x trials) arrays: every plan's cost in one
    pass, a new RTT then costs a few milliseconds.  A trial without a failure gets an
    infinite slack (its delay is then 0 without a mask) and no resent packets (index
    0 of :func:`again_curve`, 0)."""
    outs = [o for _p, o in _candidates(model, n, cfg, cap)]
    slack = np.stack([o.slack for o in outs]).astype(np.float32)
    failed = slack >= 0
    slack[~failed] = np.inf
    resent = np.where(failed, np.stack([o.resent for o in outs]), 0)
    blind = (np.stack([o.blind for o in outs]) & failed).astype(np.float32)
    return np.array([o.stream for o in outs], dtype=np.float64), slack, blind, resent


def resend_gap(path: PathView) -> int | None:
    """Packets the link carries between a loss and its resend, where the QP keeps it
    busy: a round trip's worth at the rate.  None where it is window-bound (the link
    idles, and how many packets pass depends on what is left to send) or has not yet
    measured its round trip: the RTT in its place is the initial timeout, and a 60 ms
    path's first two messages, taken for a busy link's, went out as plain SR at 5 %
    loss in bursts of 30, whose resends met the burst again (the steady state's p99
    waited behind them: 292 ms where the coded first messages gave 166)."""
    if path.window_bound or not path.rtt_measured:
        return None
    return round(path.rtt_s * path.rate_bps / (path.wire_pkt_bytes * 8))


@functools.lru_cache(maxsize=256)
def again_curve(model: LossModel, gap: int | None, rmax: int) -> np.ndarray:
    """P(some of ``r`` resent packets is lost again), for ``r`` = 0 .. ``rmax``.

    Why the chain and not the mean loss: the resent packets leave back to back, so on a
    bursty path their losses are correlated: 30 resent packets at 5 % loss in bursts
    of 30 are all lost or all delivered together far more often than 1 - 0.95^30 (79 %)
    says.  Where the QP keeps its link busy (``gap``, :func:`resend_gap`), a round trip
    of packets has passed since the loss, and the chain has moved on from it: the
    resends start from where that many steps from a loss leave it (past a burst's
    length, the chain's stationary share), and a burst takes them only if it starts
    among them (about 10 % at 5 %/30, 1 - 0.95^30 for independent loss).  Where it is
    window-bound (``gap`` None), few packets may have passed, and the resends meet the
    same packet-counted burst: every resent packet counts at the mean loss, as
    independent (the measured 60 ms cells, where selective repeat's resends met the
    burst again and again, presets README "Runs W-Y")."""
    r = np.arange(rmax + 1)
    q = model.mean_loss
    if gap is None or q <= 0:
        flat = 1.0 - (1.0 - q) ** r
        flat.setflags(write=False)  # cached: shared by every caller
        return flat
    pi, t, loss = _chain(model)
    lost = pi * loss
    state = (lost / lost.sum()) @ np.linalg.matrix_power(t, gap + 1)  # the first resend's
    keep = 1.0 - loss
    tg, tb = (float(t[0, 0]), float(t[0, 1])), (float(t[1, 0]), float(t[1, 1]))
    g, b = float(state[0] * keep[0]), float(state[1] * keep[1])
    out = np.zeros(rmax + 1)
    for i in range(1, rmax + 1):
        out[i] = 1.0 - (g + b)
        g, b = (g * tg[0] + b * tb[0]) * keep[0], (g * tg[1] + b * tb[1]) * keep[1]
    out.setflags(write=False)  # cached: shared by every caller
    return out


def _penalties(path: PathView, n: int, cfg: PolicyConfig,
               cap: float) -> tuple[np.ndarray, np.ndarray]:
    """Every candidate's packets on the wire and (plans x trials) delay in seconds:
    :meth:`Outcome.penalty`'s arithmetic, all plans at once."""
    stream, slack, blind, resent = _stacked(path.loss, n, cfg, cap)
    again = again_curve(path.loss, resend_gap(path), n).astype(np.float32)[resent]
    t_pkt = path.wire_pkt_bytes * 8 / path.rate_bps
    rtt = path.rtt_s
    pen = slack * np.float32(-t_pkt)
    pen += np.float32(rtt)
    np.maximum(pen, 0, out=pen)
    pen += blind * np.float32(cfg.follow_wait_rtt * rtt)
    pen += again * np.float32(2 * (path.rto_s or 2 * rtt))
    return stream, pen


def _costs(path: PathView, n: int, cfg: PolicyConfig, cap: float) -> list[float]:
    """:func:`plan_cost` of every candidate of ``cap`` (same arithmetic, all plans at
    once)."""
    return _costs_of(path, cfg, *_penalties(path, n, cfg, cap))


def _costs_of(path: PathView, cfg: PolicyConfig, stream: np.ndarray,
              pen: np.ndarray) -> list[float]:
    """:func:`_costs` from the candidates' packets on the wire and delays."""
    t_pkt = path.wire_pkt_bytes * 8 / path.rate_bps
    k = max(1, math.ceil(cfg.eps * pen.shape[1]))
    tail = np.partition(pen, pen.shape[1] - k, axis=1)[:, pen.shape[1] - k:].mean(axis=1)
    return list(cfg.wire_weight * stream * t_pkt + pen.mean(axis=1, dtype=np.float64) + tail)


@functools.lru_cache(maxsize=1024)
def _choose(path: PathView, n: int, cfg: PolicyConfig) -> MessagePlan:
    model = path.loss
    q = model.mean_loss
    cap = repair_cap(model, cfg, path.window_bound)
    why = (f"loss {q:.2%} ({path.source}), burst {model.mean_burst_len:.1f}, "
           f"rtt {path.rtt_s * 1e3:.0f} ms, {n} pkts"
           + (f", window-bound (repairs <= {cap:.0%})" if path.window_bound else ""))
    if q <= 0:
        return MessagePlan(scheme="sr", reason=f"{why}: path loss-free")
    cands = _candidates(model, n, cfg, cap)
    costs = _costs(path, n, cfg, cap)
    i = min(range(len(cands)), key=lambda j: (costs[j] + 1e-12 * j))
    if costs[i] > (1 - cfg.min_gain) * costs[0]:
        i = 0  # repairs that buy (almost) nothing: plain SR
    best = cands[i][0]
    p_sr = cands[0][0].p_retx
    detail = {"sr": "repairs cost more than the round trips they save",
              "tail": f"last {best.tail_pkts} pkts + {best.m} repairs",
              "fec": f"({best.k},{best.m}) x depth {best.depth}"}[best.scheme]
    return MessagePlan(scheme=best.scheme, k=best.k, m=best.m, depth=best.depth,
                       tail_pkts=best.tail_pkts, groups=best.groups, p_retx=best.p_retx,
                       reason=(f"{why}: {detail}, P(retx) {best.p_retx:.3f} vs SR {p_sr:.3f}, "
                               f"cost {costs[i] * 1e3:.1f} vs SR {costs[0] * 1e3:.1f} ms"))


@dataclass(frozen=True, slots=True)
class PlanPrediction:
    """One candidate as the policy weighs it, for a message alone on its path."""

    plan: MessagePlan
    cost_s: float
    """What the policy minimises (:func:`plan_cost`)."""
    mean_fct_s: float
    """Wire time plus the mean delay its failures add (what goodput feels)."""
    p99_fct_s: float
    """The 99th percentile of that over the sampled loss patterns."""
    chosen: bool = False


def predictions(path: PathView, n_pkts: int, cfg: PolicyConfig = PolicyConfig(), *,
                cap: float | None = None) -> list[PlanPrediction]:
    """Every plan the policy weighs for a message of ``n_pkts`` on ``path`` with its
    cost and predicted FCT, cheapest first, the one :func:`choose` takes marked.

    Why: a decision's reason names the winner only; whether a target (a p99 below
    SR's at no loss of goodput, say) is reachable at all is a question about all the
    candidates.  ``cap`` widens (or narrows) the repair cap to ask it of plans the
    policy would not send (:func:`repair_cap` otherwise)."""
    if n_pkts < 1:
        raise ConfigError(f"recovery policy: a message of {n_pkts} packets")
    view = path.quantised()
    if view.loss.mean_loss <= 0:
        raise ConfigError("recovery policy: a loss-free path has only plain SR")
    if cap is None:
        cap = repair_cap(view.loss, cfg, view.window_bound)
    elif not 0 <= cap <= 1:
        raise ConfigError(f"recovery policy: repair cap {cap} outside 0..1")
    cands = _candidates(view.loss, n_pkts, cfg, cap)
    stream, pen = _penalties(view, n_pkts, cfg, cap)
    costs = _costs_of(view, cfg, stream, pen)
    fct = stream[:, None] * (view.wire_pkt_bytes * 8 / view.rate_bps) + pen
    mean, p99 = fct.mean(axis=1), np.percentile(fct, 99, axis=1)
    picked = choose(path, n_pkts, cfg).label
    out = [PlanPrediction(plan=p, cost_s=float(c), mean_fct_s=float(m), p99_fct_s=float(q),
                          chosen=p.label == picked)
           for (p, _o), c, m, q in zip(cands, costs, mean, p99, strict=True)]
    return sorted(out, key=lambda x: x.cost_s)


# -- the QP's own counters -----------------------------------------------------------------
@dataclass(slots=True)
class LossEstimator:
    """Loss model from a QP's own loss declarations (used when the controller sent none).

    Why a simple Gilbert fit: the sender sees which of its packets were declared lost
    in sequence order, so a = P(loss) and b = P(loss | previous lost) give the classic
    Gilbert channel (r = 1 - b, p = a r / (1 - a)).  Only packets sent without repair
    cover are counted: losses FEC repaired are invisible to the sender.
    """

    min_pkts: int = 500
    sent: int = 0
    lost: int = 0
    pairs: int = 0  # a loss right after a loss
    _last_lost: int = -2
    _lost_seqs: set = field(default_factory=set)

    def on_sent(self, n: int = 1) -> None:
        self.sent += n

    def on_lost(self, seq: int) -> None:
        if seq in self._lost_seqs:
            return
        self._lost_seqs.add(seq)
        if len(self._lost_seqs) > 4096:
            self._lost_seqs = set(sorted(self._lost_seqs)[-2048:])
        self.lost += 1
        if seq == self._last_lost + 1:
            self.pairs += 1
        self._last_lost = seq

    def model(self) -> LossModel | None:
        if self.sent < self.min_pkts:
            return None
        a = self.lost / self.sent
        if a <= 0:
            return LossModel.none()
        if a >= 1:
            return None
        b = self.pairs / self.lost
        if b <= a * 1.5 or self.lost < 10:
            return LossModel.bernoulli(a)
        r = max(1e-3, 1.0 - b)
        return LossModel.gilbert_elliott(p=min(1.0, a * r / (1 - a)), r=r)


def describe(model: LossModel) -> str:
    """Short text of a loss model for reasons and tables (e.g. ``ge:1%/10``)."""
    if model.kind is LossKind.GILBERT_ELLIOTT:
        return f"ge:{model.mean_loss:.3g}/{model.mean_burst_len:.3g}"
    if model.kind is LossKind.BERNOULLI:
        return f"{model.p:.3g}"
    return "none"


