"""HPCC's per-ACK rate control at the sender (Li et al., SIGCOMM 2019), pure algorithm.

What a sender QP does with the INT hop records echoed in every ACK
(:mod:`formats.int_echo`), step by step as the paper's Algorithm 1 and the public ns-3
model (``RdmaHw::HandleAckHp`` / ``UpdateRateHp``) run it:

* per hop ``i``, from this ACK's record and the previous one of the same hop:
  ``tau = ts - ts'`` and ``txRate = (txBytes - txBytes') * 8 / tau`` (both deltas
  modulo 2^32: the echoed timestamp is 32 bits of microseconds, tx bytes are mod
  2^32), then ``u_i = txRate / B_i + min(qlen, qlen') * R_max / B_i / W`` where ``B_i``
  is the hop's line rate, ``R_max`` the QP's line rate and ``W = R_max T / 8`` its
  window in bytes (``T`` the base RTT): the second term is ``min(qlen)/(B_i T)``;
* single rate (default): ``U`` = the largest ``u_i`` and its ``tau``; the EWMA
  ``u = (u (T - tau) + U tau) / T`` with ``tau`` capped at ``T``;
* ``max_c = u / eta``; if ``max_c >= 1`` or ``incStage >= maxStage``: ``R = Rc / max_c
  + R_AI`` and stage 0 (multiplicative), else ``R = Rc + R_AI`` and stage + 1
  (additive); ``R`` is bounded to ``[R_min, R_max]`` and paced at once;
* the reference rate ``Rc`` and the stage are committed only once per RTT: on an ACK
  that acknowledges beyond ``lastUpdateSeq`` (then ``lastUpdateSeq`` becomes the next
  sequence to send); ACKs in between react from the same ``Rc`` without committing
  ("fast react", on by default as in ns-3);
* multi-rate (``multi_rate=True``, ns-3's MultiRate): the EWMA, ``Rc`` and stage are
  kept per hop, each hop proposes a rate, and the QP paces at the smallest one; hops
  not updated by this ACK propose their ``Rc``.

The first ACK only stores the hop records (and sets ``lastUpdateSeq``).  Differences
from ns-3, all where ns-3 cannot be followed literally: a hop record identical in time
to the stored one (``tau = 0``, an ACK echoing the same data packet again) or with line
rate 0 (the data packet's bitmaps lacked the field) gives no sample and is counted in
``skipped_hops`` (ns-3 would divide by zero); when the path changes (another hop count
or other node IDs) the new records are stored as on the first ACK instead of being
compared with another switch's.  Units here: seconds, bit/s, bytes.

Emulation scale: round trips here are Python senders and Python switches that wake up
late on a busy host, so queues of a packet or two come and go at any load.  The smallest RTT sample (about a millisecond on an idle softswitch,
where a packet meets no serialisation delay) makes a BDP smaller than one packet: the
queue term ``qlen / (B T)`` would count one queued packet as several BDPs, and the
window floor of one packet per QP would exceed the BDP with a few QPs, so rates would
fall to the minimum.  T therefore defaults to the smallest RTT sample but at least
``min_base_rtt_s`` = 30 ms: at the test bed's 4 Mbit/s bottleneck and 1 KiB packets a
BDP of about 14 packets, a couple per QP of an 8:1 incast, as HPCC's data-centre runs
have many packets per BDP (and the first windows of eight QPs, 7 packets each, fit a
64-packet queue).  Across a WAN the measured RTT is larger and is used as it is.  W_AI defaults to 1 % of the line rate (the paper's ``W_init (1 - eta) / N`` for
N = 5): a few-second experiment needs flows that started apart to converge.

Once per RTT: ns-3 commits ``Rc`` on the ACK of the first packet sent after the last
commit, which in its data centres (T the base RTT, many packets of a QP in flight) is
once per T.  Here T is a floor far above the real round trip (1-10 ms) and a QP of
an 8:1 incast sends one packet every ~20 ms, so that ACK is the next one: ``Rc`` would
be committed on almost every ACK, each QP's additive step would come once per packet,
i.e. in proportion to its rate (a multiplicative increase), and the AIMD that makes
HPCC fair would be lost (measured: QPs of one incast settled at 0.2-0.8 Mbit/s, and
the slowest finished a second after the fastest).  With the sender's clock
(``now_s``) and ``update_once_per_t`` (default) a commit also needs T since the last
one; ACKs in between fast-react.  Without ``now_s`` the rule is ns-3's alone.

The window: ns-3 also bounds the bytes in flight by ``W * R / R_max`` (``VAR_WIN``);
:meth:`HpccState.window_bytes` gives it, and the requester applies it.

An idle hop in multi-rate: a hop that sent nothing and queued nothing for a whole T
brings its EWMA to 0 and ``Rc / (u / eta)`` to its limit, +inf; the rate is then the
line rate (ns-3 would divide by zero).  The formulas themselves are
:mod:`traffic.cc.hpcc_math`, shared with the controller's engine; :class:`HpccSender`
is this algorithm behind the sender interface (:mod:`traffic.cc.base`).

Pacing: ns-3's NIC sends a QP's next packet ``size / R`` after the previous one and
never catches up after a pause (``m_nextAvail``); the requester's token bucket for an
HPCC QP is therefore one full packet deep (``pacing_burst_pkts``), not the few
milliseconds of credit other QPs get.  What the NIC never has is a late wake-up: when
the sender loop wakes after a packet was due, the requester charges that packet at its
due time, so the next gap runs from there (before, a loop waking 1 ms late for each
2.2 ms packet sent at 2/3 of R); time with nothing to send still earns nothing.  A deeper bucket lets every QP release a burst
when a late wake-up or a burst of ACKs opens it, and eight such bursts arriving together
are a queue HPCC then charges to every QP (``qlen / (B T)``).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from formats.int_echo import EchoHop
from formats.int_md import MAX_HOPS
from traffic.cc.base import SenderCcBase
from traffic.cc.hpcc_math import ai_rate, bound, ewma, hop_utilisation, mi_rate, multiplicative
from traffic.errors import ConfigError

__all__ = ["EchoHop", "HpccSender", "HpccSettings", "HpccState", "cli_args"]

_TS_MOD = 1 << 32     # echoed egress timestamps: 32 bits of microseconds
_BYTES_MOD = 1 << 32  # tx bytes modulo 2^32


@dataclass(frozen=True, slots=True, kw_only=True)
class HpccSettings:
    """HPCC's parameters (paper / ns-3 names in the comments)."""

    eta: float = 0.95                 # target utilisation (U_TARGET)
    max_stage: int = 5                # additive steps before a multiplicative one (MI_THRESH)
    w_ai_fraction: float = 0.01       # additive increase W_AI, fraction of the line rate (RATE_AI)
    min_rate_fraction: float = 0.001  # lowest rate, fraction of the line rate (MinRate)
    base_rtt_s: float | None = None   # T; None: the QP's smallest RTT sample, at least ...
    min_base_rtt_s: float = 0.03      # ... this (emulation scale, see the module docstring)
    multi_rate: bool = False          # per-hop reference rates (MULTI_RATE)
    fast_react: bool = True           # react on every ACK, commit once per RTT (FAST_REACT)
    window: bool = True               # bound bytes in flight by W R / R_max (HAS_WIN, VAR_WIN)
    pacing_burst_pkts: float = 1.0    # pacer depth in full packets (ns-3: 1, next = now + size/R)
    update_once_per_t: bool = True    # commit Rc at most once per T as well (module docstring)

    def __post_init__(self) -> None:
        if not 0.0 < self.eta <= 1.0:
            raise ConfigError(f"HPCC settings: eta={self.eta!r} outside (0, 1]")
        if not 0 <= self.max_stage <= 1000:
            raise ConfigError(f"HPCC settings: max_stage={self.max_stage!r} outside 0..1000")
        for name in ("w_ai_fraction", "min_rate_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"HPCC settings: {name}={v!r} outside 0..1")
        if not 1.0 <= self.pacing_burst_pkts <= 64.0:
            raise ConfigError(
                f"HPCC settings: pacing_burst_pkts={self.pacing_burst_pkts!r} outside 1..64")
        for name in ("base_rtt_s", "min_base_rtt_s"):
            v = getattr(self, name)
            if v is not None and not 1e-6 <= v <= 60:
                raise ConfigError(f"HPCC settings: {name}={v!r} outside 1e-6..60 s")

    def base_rtt(self, measured_s: float | None) -> float:
        """T: the configured base RTT, else the smallest sample, at least the floor."""
        if self.base_rtt_s is not None:
            return self.base_rtt_s
        return max(self.min_base_rtt_s, measured_s or 0.0)


@dataclass(slots=True)
class _HopState:
    u: float = 1.0
    rc: float = 0.0
    inc_stage: int = 0


@dataclass(slots=True, kw_only=True)
class HpccState:
    """HPCC state of one QP.  Feed :meth:`on_ack`; read :attr:`rate_bps`."""

    max_rate_bps: float
    settings: HpccSettings = field(default_factory=HpccSettings)
    rate_bps: float = field(init=False)       # what the QP paces at (ns-3 m_rate)
    ref_rate_bps: float = field(init=False)   # Rc, committed once per RTT (hp.m_curRate)
    inc_stage: int = 0
    u: float = 1.0                            # EWMA of the normalised inflight (hp.u)
    last_update_seq: int | None = None        # None until the first ACK
    last_update_s: float | None = None        # sender time of the last commit
    updates: int = 0                          # per-RTT (committing) updates
    fast_reacts: int = 0                      # per-ACK updates in between
    skipped_hops: int = 0                     # hop records that gave no sample
    path_changes: int = 0
    _hops: tuple[EchoHop, ...] = ()
    _hop_state: list[_HopState] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.max_rate_bps > 0:
            raise ConfigError(f"HPCC: line rate {self.max_rate_bps!r} bit/s must be > 0")
        self.rate_bps = self.ref_rate_bps = float(self.max_rate_bps)
        self._hop_state = [_HopState(rc=self.rate_bps) for _ in range(MAX_HOPS)]

    @property
    def w_ai_bps(self) -> float:
        return self.settings.w_ai_fraction * self.max_rate_bps

    @property
    def min_rate_bps(self) -> float:
        return self.settings.min_rate_fraction * self.max_rate_bps

    def window_bytes(self, base_rtt_s: float) -> float:
        """ns-3's variable window: ``W * R / R_max`` with ``W = R_max * T / 8`` bytes."""
        return self.rate_bps * base_rtt_s / 8

    def _bound(self, r: float) -> float:
        return bound(r, self.min_rate_bps, self.max_rate_bps)

    def on_ack(self, hops: Sequence[EchoHop], *, ack_seq: int, next_seq: int,
               base_rtt_s: float, now_s: float | None = None) -> bool:
        """One ACK with its echoed hops; True when :attr:`rate_bps` changed.

        ``ack_seq``: the first sequence not yet acknowledged (cumulative ACK);
        ``next_seq``: the next sequence the QP will send (ns-3's ``snd_nxt``).
        Sequences count packets here, ns-3's count bytes: only their order matters.
        """
        if len(hops) > MAX_HOPS:
            raise ConfigError(f"HPCC: {len(hops)} hops, at most {MAX_HOPS}")
        if self.last_update_seq is None:
            self.last_update_seq, self.last_update_s = next_seq, now_s
            self._hops = tuple(hops)
            return False
        if len(hops) != len(self._hops) or any(
                h.node_id != p.node_id for h, p in zip(hops, self._hops, strict=True)):
            self.path_changes += 1
            self._hops = tuple(hops)
            return False
        full = ack_seq > self.last_update_seq
        if (full and now_s is not None and self.settings.update_once_per_t
                and self.last_update_s is not None and now_s - self.last_update_s < base_rtt_s):
            full = False
        if not full and not self.settings.fast_react:
            return False
        before = self.rate_bps
        if self.settings.multi_rate:
            self._update_multi(hops, base_rtt_s, commit=full)
        else:
            self._update_single(hops, base_rtt_s, commit=full)
        if full:
            self.updates += 1
            self.last_update_seq = max(self.last_update_seq, next_seq)
            self.last_update_s = now_s
        else:
            self.fast_reacts += 1
        return self.rate_bps != before

    # -- per hop ---------------------------------------------------------------------
    def _hop_u(self, h: EchoHop, p: EchoHop, base_rtt_s: float) -> tuple[float, float] | None:
        """(u, tau in seconds) of one hop, or None when the pair gives no sample."""
        tau_us = (h.egress_ts - p.egress_ts) % _TS_MOD
        if tau_us == 0 or h.line_rate == 0:
            self.skipped_hops += 1
            return None
        tau = tau_us * 1e-6
        u = hop_utilisation((h.tx_bytes - p.tx_bytes) % _BYTES_MOD, tau,
                            min(h.queue_bytes, p.queue_bytes), h.line_rate * 1e6,
                            self.max_rate_bps, base_rtt_s)
        return u, tau

    def _update_single(self, hops: Sequence[EchoHop], t: float, *, commit: bool) -> None:
        big_u, dt, any_hop = 0.0, 0.0, False
        for h, p in zip(hops, self._hops, strict=True):
            s = self._hop_u(h, p, t)
            if s is None:
                continue
            any_hop = True
            if s[0] > big_u:
                big_u, dt = s
        self._hops = tuple(hops)
        if not any_hop:
            return
        dt = min(dt, t)
        self.u = ewma(self.u, big_u, dt, t)
        max_c = self.u / self.settings.eta
        if multiplicative(max_c, self.inc_stage, self.settings.max_stage):
            new_rate, new_stage = mi_rate(self.ref_rate_bps, max_c, self.w_ai_bps), 0
        else:
            new_rate, new_stage = ai_rate(self.ref_rate_bps, self.w_ai_bps), self.inc_stage + 1
        self.rate_bps = self._bound(new_rate)
        if commit:
            self.ref_rate_bps = self.rate_bps
            self.inc_stage = new_stage

    def _update_multi(self, hops: Sequence[EchoHop], t: float, *, commit: bool) -> None:
        updated: list[bool] = []
        for i, (h, p) in enumerate(zip(hops, self._hops, strict=True)):
            s = self._hop_u(h, p, t)
            updated.append(s is not None)
            if s is not None:
                u, tau = s
                tau = min(tau, t)
                st = self._hop_state[i]
                st.u = ewma(st.u, u, tau, t)
        self._hops = tuple(hops)
        if not any(updated):
            return
        new_rate = self.max_rate_bps
        proposals: dict[int, tuple[float, int]] = {}
        for i, upd in enumerate(updated):
            st = self._hop_state[i]
            if not upd:
                new_rate = min(new_rate, st.rc)
                continue
            c = st.u / self.settings.eta
            if multiplicative(c, st.inc_stage, self.settings.max_stage):
                r, stage = mi_rate(st.rc, c, self.w_ai_bps), 0   # c = 0: the line rate
            else:
                r, stage = ai_rate(st.rc, self.w_ai_bps), st.inc_stage + 1
            r = self._bound(r)
            proposals[i] = (r, stage)
            new_rate = min(new_rate, r)
        self.rate_bps = new_rate
        if commit:
            self.ref_rate_bps = new_rate
            for i, (r, stage) in proposals.items():
                self._hop_state[i].rc = r
                self._hop_state[i].inc_stage = stage

    def snapshot(self) -> dict[str, float | int]:
        return {"line_rate_bps": self.max_rate_bps, "rate_bps": self.rate_bps,
                "ref_rate_bps": self.ref_rate_bps, "u": round(self.u, 6),
                "inc_stage": self.inc_stage, "updates": self.updates,
                "fast_reacts": self.fast_reacts, "skipped_hops": self.skipped_hops,
                "path_changes": self.path_changes}


class HpccSender(SenderCcBase):
    """HPCC as a QP's :class:`~traffic.cc.base.SenderCc`: :class:`HpccState` with the
    QP's RTT samples (T) and its window, and the reaction timing of the summary (the
    first echoed queue above zero and the first rate cut after it)."""

    name = "hpcc-sender"
    snapshot_key = "hpcc"
    wants_echo = True

    def __init__(self, line_rate_bps: float, settings: HpccSettings | None = None) -> None:
        super().__init__(line_rate_bps)
        self.settings = settings if settings is not None else HpccSettings()
        self.state = HpccState(max_rate_bps=line_rate_bps, settings=self.settings)
        self.pacing_burst_pkts = self.settings.pacing_burst_pkts  # ns-3: one packet
        self.min_rtt_s: float | None = None      # smallest RTT sample: T unless configured
        self.first_queue_s: float | None = None  # first echoed queue above zero ...
        self.first_cut_s: float | None = None    # ... and the first rate cut after it
        self.max_queue_bytes = 0                 # deepest queue an echo reported

    @property
    def rate_bps(self) -> float:
        return self.state.rate_bps

    @property
    def base_rtt_s(self) -> float:
        return self.settings.base_rtt(self.min_rtt_s)

    def on_ack(self, hops: Sequence[EchoHop], *, ack_seq: int, next_seq: int,
               now_s: float) -> bool:
        q = max((h.queue_bytes for h in hops), default=0)
        self.max_queue_bytes = max(self.max_queue_bytes, q)
        if self.first_queue_s is None and q:
            self.first_queue_s = now_s
        before = self.state.rate_bps
        changed = self.state.on_ack(hops, ack_seq=ack_seq, next_seq=next_seq,
                                    base_rtt_s=self.base_rtt_s, now_s=now_s)
        if (changed and self.state.rate_bps < before and self.first_queue_s is not None
                and self.first_cut_s is None):
            self.first_cut_s = now_s
        return changed

    def on_rtt(self, rtt_s: float) -> None:
        if self.min_rtt_s is None or rtt_s < self.min_rtt_s:
            self.min_rtt_s = rtt_s

    def window_bytes(self) -> float | None:
        return self.state.window_bytes(self.base_rtt_s) if self.settings.window else None

    @property
    def reaction_s(self) -> float | None:
        q, c = self.first_queue_s, self.first_cut_s
        return None if q is None or c is None else c - q

    def snapshot(self) -> dict[str, Any]:
        return {**self.state.snapshot(), "base_rtt_s": self.base_rtt_s,
                "min_rtt_s": self.min_rtt_s, "max_echo_queue_bytes": self.max_queue_bytes,
                "first_queue_s": self.first_queue_s, "first_cut_s": self.first_cut_s,
                "reaction_s": self.reaction_s}


def cli_args(h: HpccSettings) -> list[str]:
    """``h`` as ``python -m traffic`` flags (the test bed starts senders with them)."""
    argv = ["--hpcc-eta", f"{h.eta!r}", "--hpcc-max-stage", str(h.max_stage),
            "--hpcc-wai", f"{h.w_ai_fraction!r}", "--hpcc-min-base-rtt",
            f"{h.min_base_rtt_s!r}", "--hpcc-pacing-burst", f"{h.pacing_burst_pkts!r}"]
    if h.base_rtt_s is not None:
        argv += ["--hpcc-base-rtt", f"{h.base_rtt_s!r}"]
    if h.multi_rate:
        argv += ["--hpcc-multi-rate"]
    if not h.window:
        argv += ["--hpcc-no-window"]
    return argv
