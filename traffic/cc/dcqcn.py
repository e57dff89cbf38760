"""DCQCN in the sender, as an RDMA NIC runs it: the reaction point of one QP.

The algorithm itself is :class:`traffic.cc.dcqcn_engine.DcqcnEngine` (one implementation
for the fluid model and the senders); this module gives it a QP's clock and bytes:
CNPs cut the rate, the alpha and increase timers and the byte counter raise it again,
and the requester sets its token bucket to the result.

Emulation scale.  DCQCN's constants are tuned for 40 Gbit/s links with round trips of
a few microseconds; here a Python sender drives Mbit/s links through Python switches,
and a round trip takes milliseconds.  So every *time* constant is multiplied by
:data:`TIME_SCALE` (1000: microseconds become milliseconds):

=====================  ==================  =====================
constant               paper / ns-3        here (default)
=====================  ==================  =====================
alpha timer K          55 us               55 ms
rate-increase timer T  55 us               55 ms
CNP interval (NP)      50 us               50 ms (see below)
decrease interval      4 us                4 ms
byte counter B         10 MB at 40 Gbit/s  100 ms of line rate
                       (= 2 ms = 36 T)     (12.5 KB at 1 Mbit/s)
=====================  ==================  =====================

Rates stay fractions of the QP's line rate (its configured ``rate_bps``): R_AI 0.1 %,
R_HAI 1 %, minimum 0.1 %; g = 1/256 and F = 5 as in the paper.  The byte counter is
the one constant not scaled as the others: scaled it would be 2 s of line rate, and
hyper increase (which needs F byte-counter events since the last cut) would be out
of reach of a few-second experiment, leaving a cut flow 0.1 % of line rate per T to
climb back (a minute from half rate).  At 100 ms (about 2 T at line rate) a flow cut
to a third is back at line rate in about 2 s once the marks stop.

The notification point (the receiving endpoint) sends at most one CNP per QP per
50 us, a microsecond-scale interval, so at this scale nearly every marked packet
becomes a CNP.  The reaction point therefore takes at most one CNP per
``cnp_interval_s`` (50 ms) and counts the rest: the same effect as the paper's NP
interval, scaled with the other time constants.

Cost: the engine is called only when one of its deadlines (alpha timer, increase
timer, byte counter) is due or a CNP is taken, not per packet; the check in between
is a few integer comparisons.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from traffic.cc.base import SenderCcBase
from traffic.cc.dcqcn_engine import DcqcnEngine, DcqcnParameterError, DcqcnParams
from traffic.errors import ConfigError

__all__ = ["TIME_SCALE", "DcqcnReactionPoint", "DcqcnSender", "DcqcnSettings"]

TIME_SCALE = 1000.0
_MIN_RATE_BPS = 1_000.0  # traffic.pacing's lower bound


@dataclass(frozen=True, slots=True, kw_only=True)
class DcqcnSettings:
    """DCQCN constants of a QP at emulation scale (see the module docstring)."""

    timer_s: float = 55e-6 * TIME_SCALE
    alpha_interval_s: float = 55e-6 * TIME_SCALE
    cnp_interval_s: float = 50e-6 * TIME_SCALE
    decrease_interval_s: float = 4e-6 * TIME_SCALE
    byte_counter_s: float = 0.1
    g: float = 1.0 / 256
    fast_recovery_stages: int = 5
    rate_ai_fraction: float = 0.001
    rate_hai_fraction: float = 0.01
    min_rate_fraction: float = 0.001

    def __post_init__(self) -> None:
        for name in ("timer_s", "alpha_interval_s", "byte_counter_s"):
            v = getattr(self, name)
            if not 1e-4 <= v <= 600:
                raise ConfigError(f"DCQCN settings: {name}={v!r} outside 0.0001..600 s")
        for name in ("cnp_interval_s", "decrease_interval_s"):
            v = getattr(self, name)
            if not 0 <= v <= 600:
                raise ConfigError(f"DCQCN settings: {name}={v!r} outside 0..600 s")
        for name in ("g", "rate_ai_fraction", "rate_hai_fraction", "min_rate_fraction"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"DCQCN settings: {name}={v!r} outside 0..1")
        if not 0 <= self.fast_recovery_stages <= 1000:
            raise ConfigError(f"DCQCN settings: fast_recovery_stages="
                              f"{self.fast_recovery_stages!r} outside 0..1000")

    def params(self, line_rate_bps: float, *, mtu: int = 1024) -> DcqcnParams:
        """The engine's parameters for a QP of ``line_rate_bps`` (byte counter from it)."""
        byte_counter = max(2 * mtu, round(line_rate_bps / 8 * self.byte_counter_s))
        try:
            return DcqcnParams(g=self.g, alpha_interval_s=self.alpha_interval_s,
                               timer_s=self.timer_s, byte_counter_bytes=byte_counter,
                               fast_recovery_stages=self.fast_recovery_stages,
                               rate_ai_fraction=self.rate_ai_fraction,
                               rate_hai_fraction=self.rate_hai_fraction,
                               min_rate_fraction=self.min_rate_fraction,
                               decrease_interval_s=self.decrease_interval_s)
        except DcqcnParameterError as e:  # pragma: no cover - the checks above come first
            raise ConfigError(f"DCQCN settings: {e}") from None


def _ns(t_s: float) -> int:
    return round(t_s * 1e9)


@dataclass(slots=True, kw_only=True)
class DcqcnReactionPoint:
    """DCQCN state of one QP: feed it CNPs and sent bytes, read :attr:`rate_bps`.

    ``on_cnp`` and ``tick`` return True when the rate changed (the caller then sets
    its pacer); time is the caller's clock in seconds.
    """

    line_rate_bps: float
    settings: DcqcnSettings = field(default_factory=DcqcnSettings)
    mtu: int = 1024
    now_s: float = 0.0
    cnps_rx: int = 0          # CNPs received
    cnps_applied: int = 0     # ... taken by the engine (at most one per cnp_interval_s)
    rate_cuts: int = 0        # rate decreases
    rate_increases: int = 0   # engine updates that raised the rate
    min_rate_seen_bps: float = field(init=False)
    engine: DcqcnEngine = field(init=False)
    _last_cnp_s: float = field(init=False, default=-math.inf)
    _unsent: int = field(init=False, default=0)   # bytes sent, not yet given to the engine
    _due_ns: int = field(init=False, default=0)   # earliest alpha / increase deadline
    _bytes_due: int = field(init=False, default=0)  # bytes until the next byte-counter event

    def __post_init__(self) -> None:
        if not _MIN_RATE_BPS <= self.line_rate_bps <= 4e11:
            raise ConfigError(f"DCQCN: line rate {self.line_rate_bps!r} bit/s outside "
                              f"{_MIN_RATE_BPS:g}..4e11")
        self.engine = DcqcnEngine(n_flows=1, params=self.settings.params(self.line_rate_bps,
                                                                         mtu=self.mtu))
        self.engine.start_flows([0], max_rate_bps=self.line_rate_bps, now_ns=_ns(self.now_s))
        self.min_rate_seen_bps = self.line_rate_bps
        self._refresh()

    @property
    def rate_bps(self) -> float:
        """The current rate, never below the pacer's minimum."""
        return max(_MIN_RATE_BPS, float(self.engine.rate_bps[0]))

    @property
    def target_bps(self) -> float:
        return float(self.engine.target_bps[0])

    @property
    def alpha(self) -> float:
        return float(self.engine.alpha[0])

    def _refresh(self) -> None:
        e = self.engine
        self._due_ns = int(min(e.alpha_deadline_ns[0], e.timer_deadline_ns[0]))
        self._bytes_due = int(e.params.byte_counter_bytes - e.byte_count[0])

    def _update(self, now_s: float) -> None:
        """Give the engine the bytes sent so far, then fire its due timers."""
        self.now_s = now_s
        if self._unsent:
            self.engine.on_sent([0], [self._unsent])
            self._unsent = 0
        self.engine.advance(_ns(now_s))

    def on_sent(self, nbytes: int) -> None:
        """The QP put ``nbytes`` on the wire (counted; given to the engine when due)."""
        self._unsent += nbytes

    def tick(self, now_s: float) -> bool:
        """Run the engine if a timer or the byte counter is due; True if the rate changed."""
        if _ns(now_s) < self._due_ns and self._unsent < self._bytes_due:
            return False
        before = float(self.engine.rate_bps[0])
        self._update(now_s)
        self._refresh()
        after = float(self.engine.rate_bps[0])
        if after > before:
            self.rate_increases += 1
        return after != before

    def on_cnp(self, now_s: float) -> bool:
        """A CNP arrived; True if it changed the rate."""
        self.cnps_rx += 1
        if now_s - self._last_cnp_s < self.settings.cnp_interval_s:
            return False
        self._last_cnp_s = now_s
        self.cnps_applied += 1
        before = float(self.engine.rate_bps[0])
        self._update(now_s)
        cuts = self.engine.decreases
        self.engine.on_cnp([0], _ns(now_s))
        self.rate_cuts += self.engine.decreases - cuts
        self._refresh()
        after = float(self.engine.rate_bps[0])
        self.min_rate_seen_bps = min(self.min_rate_seen_bps, after)
        return after != before

    def snapshot(self) -> dict[str, float | int]:
        """Counters and state for the JSON summary."""
        return {"line_rate_bps": self.line_rate_bps, "rate_bps": self.rate_bps,
                "target_bps": self.target_bps, "alpha": round(self.alpha, 6),
                "cnps_rx": self.cnps_rx, "cnps_applied": self.cnps_applied,
                "rate_cuts": self.rate_cuts, "rate_increases": self.rate_increases,
                "min_rate_bps": self.min_rate_seen_bps}


class DcqcnSender(SenderCcBase):
    """DCQCN as a QP's :class:`~traffic.cc.base.SenderCc`: the reaction point on the
    QP's CNPs, its clock (:meth:`tick` before each send round) and its bytes sent."""

    name = "dcqcn"
    snapshot_key = "dcqcn"

    def __init__(self, line_rate_bps: float, settings: DcqcnSettings | None = None, *,
                 mtu: int = 1024, now_s: float = 0.0) -> None:
        super().__init__(line_rate_bps)
        self.rp = DcqcnReactionPoint(line_rate_bps=line_rate_bps,
                                     settings=settings if settings is not None
                                     else DcqcnSettings(), mtu=mtu, now_s=now_s)

    @property
    def rate_bps(self) -> float:
        return self.rp.rate_bps

    def on_cnp(self, now_s: float) -> bool:
        return self.rp.on_cnp(now_s)

    def on_sent(self, nbytes: int) -> None:
        self.rp.on_sent(nbytes)

    def tick(self, now_s: float) -> bool:
        return self.rp.tick(now_s)

    def snapshot(self) -> dict[str, float | int]:
        return self.rp.snapshot()
