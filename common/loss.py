"""Random packet loss defined once: the model (what a link loses) and its sampler.

Why here: the topology files and experiment specs (``controller.topology``,
``mininet_topos``), the test bed's delay lines and eBPF droppers (``mininet_topos``,
``ebpf.loss``), the emulated receivers (``traffic.emulation``) and the controller's burst
fits (``controller.lossmap.burst``) all speak of the same two models, in netem's
vocabulary: Bernoulli loss ``p``, and the Gilbert-Elliott chain moving good->bad with
``p`` and bad->good with ``r`` per packet, delivering a packet with probability ``h`` in
the bad state and ``k`` in the good one (netem's ``loss gemodel p r 1-h 1-k``; the
classic Gilbert channel is h=0, k=1).

Text form (``--loss`` of ``python -m traffic`` and of the delay line): ``none``, ``P`` /
``bernoulli:P``, ``ge:p,r[,h[,k]]`` / ``gilbert-elliott:p,r[,h[,k]]`` (fractions), and
either Gilbert-Elliott form followed by ``@SLOT`` (``ge:1%/10@120us``): the chain's clock.

The clock: netem's chain moves once per packet, so a burst is "B packets" whatever the
time between them, and a sender that has stopped (its timer backed off) finds the burst
still there when it probes, one packet per timeout, for as long as it keeps probing;
a WAN's bursts (a congested queue, a flapping link) end with time.  With a slot of T
seconds the chain moves once per slot that passes, and once per packet as before: on
a link sending one packet per slot (T = a full packet's wire time at the link's rate)
it is netem's chain, and idle time ends bursts as it would on the wire.
"""
from __future__ import annotations

import dataclasses
import enum
import math
import random
from dataclasses import dataclass

__all__ = ["LossKind", "LossModel", "LossProcess", "LossSpecError"]


class LossSpecError(ValueError):
    """A loss model's text or parameters are malformed or out of range."""


def _seconds(text: str) -> float:
    """``120us``, ``0.5ms``, ``1e-4s`` or ``1e-4`` -> seconds (ValueError when none)."""
    t = text.strip()
    for suffix, per_s in (("us", 1e6), ("ms", 1e3), ("s", 1.0)):
        if t.endswith(suffix):
            return float(t[: -len(suffix)]) / per_s
    return float(t)


def _fraction(text: str) -> float:
    """``0.01`` or ``1%`` -> 0.01 (ValueError when neither)."""
    t = text.strip()
    return float(t[:-1]) / 100 if t.endswith("%") else float(t)


class LossKind(enum.StrEnum):
    NONE = "none"
    BERNOULLI = "bernoulli"
    GILBERT_ELLIOTT = "gilbert-elliott"


@dataclass(frozen=True, slots=True, kw_only=True)
class LossModel:
    """Random loss on a link, in the Gilbert-Elliott vocabulary netem uses.

    - ``none``: no loss.
    - ``bernoulli``: every packet is lost independently with probability ``p``.
    - ``gilbert-elliott``: a two-state Markov chain, moving good->bad with probability
      ``p`` and bad->good with ``r`` per packet; ``h`` is the probability that a packet
      is *delivered* in the bad state and ``k`` that it is delivered in the good state
      (netem's ``loss gemodel p r 1-h 1-k``).  The classic Gilbert channel is h=0, k=1.

    ``slot_s`` (Gilbert-Elliott only): 0, the chain moves once per packet (netem); T > 0,
    also once per T seconds that pass between packets (the module's "clock").
    """

    kind: LossKind = LossKind.NONE
    p: float = 0.0
    r: float = 1.0
    h: float = 0.0
    k: float = 1.0
    slot_s: float = 0.0

    @classmethod
    def none(cls) -> LossModel:
        return cls()

    @classmethod
    def bernoulli(cls, p: float) -> LossModel:
        return cls(kind=LossKind.BERNOULLI, p=p)

    @classmethod
    def gilbert_elliott(cls, p: float, r: float, h: float = 0.0, k: float = 1.0) -> LossModel:
        return cls(kind=LossKind.GILBERT_ELLIOTT, p=p, r=r, h=h, k=k)

    @classmethod
    def bursty(cls, mean_loss: float, mean_burst_pkts: float = 3.0) -> LossModel:
        """A Gilbert channel (h=0, k=1) with the given long-run loss and mean burst length.

        Bursts end with probability r per packet, so their mean length is 1/r; the
        stationary bad-state share p/(p+r) is the loss rate.
        """
        if not 0.0 <= mean_loss < 1.0:
            raise LossSpecError(f"bursty loss: mean_loss {mean_loss} must be in [0, 1)")
        if mean_burst_pkts < 1.0:
            raise LossSpecError(f"bursty loss: mean_burst_pkts {mean_burst_pkts} must be >= 1")
        r = 1.0 / mean_burst_pkts
        p = mean_loss * r / (1.0 - mean_loss)
        return cls.gilbert_elliott(p=p, r=r, h=0.0, k=1.0)

    def clocked(self, slot_s: float) -> LossModel:
        """The same chain moving once per ``slot_s`` seconds too (0: per packet only);
        a model without a chain is returned unchanged."""
        if self.kind is not LossKind.GILBERT_ELLIOTT:
            return self
        return dataclasses.replace(self, slot_s=float(slot_s))

    def bad_after(self, bad: bool, steps: int) -> float:
        """P(the chain is in the bad state ``steps`` moves from now | bad now or not).

        The two-state chain's n-step transition: with pi = p/(p+r), the stationary bad
        share, and l = 1-p-r, P(bad | bad) = pi + (1-pi) l^n and P(bad | good) =
        pi (1 - l^n); the eBPF emulator (ebpf/loss.c) computes the same in fixed point.
        """
        if steps <= 0 or self.kind is not LossKind.GILBERT_ELLIOTT:
            return 1.0 if bad else 0.0
        if self.p + self.r == 0.0:
            return 1.0 if bad else 0.0
        pi = self.p / (self.p + self.r)
        ln = (1.0 - self.p - self.r) ** steps
        return min(1.0, max(0.0, pi + (1.0 - pi) * ln if bad else pi * (1.0 - ln)))

    @property
    def mean_loss(self) -> float:
        """Long-run fraction of packets lost."""
        if self.kind is LossKind.NONE:
            return 0.0
        if self.kind is LossKind.BERNOULLI:
            return self.p
        if self.p + self.r == 0.0:  # chain never leaves the good state
            return 1.0 - self.k
        bad = self.p / (self.p + self.r)
        return bad * (1.0 - self.h) + (1.0 - bad) * (1.0 - self.k)

    def loss_count_interval(self, n_pkts: int, z: float = 3.29) -> tuple[float, float]:
        """Range of the number of losses among ``n_pkts`` expected with ``z`` standard
        deviations (3.29: two-sided 99.9 %), by the normal approximation.

        For Gilbert-Elliott the variance grows with the burstiness: the state part is
        scaled by (1+l)/(1-l) with l = 1-p-r, the chain's second eigenvalue.
        """
        mean = n_pkts * self.mean_loss
        if self.kind is LossKind.GILBERT_ELLIOTT and self.p + self.r > 0:
            bad = self.p / (self.p + self.r)
            lb, lg = 1.0 - self.h, 1.0 - self.k
            lam = 1.0 - self.p - self.r
            corr = (1.0 + lam) / (1.0 - lam) if lam < 1.0 else float("inf")
            var1 = (bad * (1 - bad) * (lb - lg) ** 2 * corr
                    + bad * lb * (1 - lb) + (1 - bad) * lg * (1 - lg))
        else:
            q = self.mean_loss
            var1 = q * (1.0 - q)
        half = z * (n_pkts * var1) ** 0.5
        return (max(0.0, mean - half), min(float(n_pkts), mean + half))

    @property
    def bad_fraction(self) -> float:
        """Stationary share of packets sent in the bad state (Gilbert-Elliott)."""
        if self.kind is not LossKind.GILBERT_ELLIOTT or self.p + self.r == 0.0:
            return 0.0
        return self.p / (self.p + self.r)

    @property
    def mean_burst_len(self) -> float:
        """Mean run of consecutive bad-state packets, 1/r (the loss burst for h=0, k=1)."""
        if self.kind is LossKind.NONE:
            return 0.0
        if self.kind is LossKind.BERNOULLI:
            return 1.0 / (1.0 - self.p) if self.p < 1.0 else math.inf
        return 1.0 / self.r if self.r else math.inf

    def problems(self) -> list[str]:
        """What is out of range (empty when the model is usable)."""
        names = {LossKind.NONE: (), LossKind.BERNOULLI: ("p",),
                 LossKind.GILBERT_ELLIOTT: ("p", "r", "h", "k")}[self.kind]
        out = [f"{self.kind} {n}={getattr(self, n)!r} outside [0, 1]" for n in names
               if not (isinstance(getattr(self, n), (int, float))
                       and 0.0 <= getattr(self, n) <= 1.0)]
        if self.kind is LossKind.BERNOULLI and self.p == 1.0:
            out.append("bernoulli p=1 loses every packet")
        if self.kind is LossKind.GILBERT_ELLIOTT and self.p > 0 and self.r == 0:
            out.append("gilbert-elliott r=0 with p > 0 never leaves the bad state")
        if not (isinstance(self.slot_s, (int, float)) and math.isfinite(self.slot_s)
                and 0.0 <= self.slot_s <= 1.0):
            out.append(f"slot {self.slot_s!r} s outside 0..1 s")
        elif self.slot_s and self.kind is not LossKind.GILBERT_ELLIOTT:
            out.append(f"a slot (@) only applies to a gilbert-elliott chain, not {self.kind}")
        return out

    @classmethod
    def parse(cls, text: str) -> LossModel:
        """The model of ``none``, ``P``, ``P%``, ``bernoulli:P``, ``ge:p,r[,h[,k]]``,
        ``gilbert-elliott:p,r[,h[,k]]`` or ``ge:P%/B`` (loss P in bursts of B packets
        on average: :meth:`bursty`, the recovery sweep's labels), a Gilbert-Elliott form
        with ``@SLOT`` (``120us``, ``0.5ms``, ``1e-4s``: :attr:`slot_s`);
        :class:`LossSpecError` naming the text otherwise."""
        s = text.strip().lower()
        s, at, slot = s.partition("@")
        kind, sep, args = s.partition(":")
        try:
            slot_s = _seconds(slot) if at else 0.0
            if s in ("", "none", "0", "0%"):
                model = cls.none()
            elif kind in ("ge", "gilbert-elliott") and sep and "/" in args:
                rate, _, burst = args.partition("/")
                model = cls.bursty(_fraction(rate), float(burst))
            elif kind in ("ge", "gilbert-elliott") and sep:
                vals = [float(v) for v in args.split(",")]
                if not 2 <= len(vals) <= 4:
                    raise LossSpecError("gilbert-elliott needs p,r[,h[,k]]")
                model = cls.gilbert_elliott(*vals)
            else:
                model = cls.bernoulli(_fraction(s.removeprefix("bernoulli:")))
            if at:
                model = dataclasses.replace(model, slot_s=slot_s)
        except ValueError as e:
            why = str(e) if isinstance(e, LossSpecError) else "not a number"
            raise LossSpecError(f"loss {text!r}: {why}; expected none, P, P%, bernoulli:P, "
                                "ge:p,r[,h[,k]] or ge:P%/BURST, the last two with an "
                                "optional @SLOT (e.g. @120us)") from None
        bad = model.problems()
        if bad:
            raise LossSpecError(f"loss {text!r}: {'; '.join(bad)}")
        return model

    def to_dict(self) -> dict[str, object]:
        if self.kind is LossKind.NONE:
            return {"model": "none"}
        if self.kind is LossKind.BERNOULLI:
            return {"model": "bernoulli", "p": self.p}
        d: dict[str, object] = {"model": "gilbert-elliott", "p": self.p, "r": self.r,
                                "h": self.h, "k": self.k}
        if self.slot_s:
            d["slot_s"] = self.slot_s
        return d


class LossProcess:
    """Per-packet loss verdicts from a :class:`LossModel` (one instance per direction).

    Gilbert-Elliott: the verdict uses the current state, then the state moves
    (good->bad with p, bad->good with r); the chain starts in the good state.  With a
    slot (:attr:`LossModel.slot_s`) and the packet's time given, the chain first takes
    the moves of the slots that passed since it last moved (the clock runs one slot per
    packet too, so packets faster than one per slot see the per-packet chain).
    Seeded, so a run's loss pattern can be reproduced and counted.
    """

    __slots__ = ("_bad", "_clock_s", "_rng", "model")

    def __init__(self, model: LossModel, rng: random.Random | None = None, *,
                 seed: int = 1) -> None:
        self.model = model
        self._rng = rng if rng is not None else random.Random(seed)
        self._bad = False
        self._clock_s: float | None = None

    @property
    def lossy(self) -> bool:
        return self.model.kind is not LossKind.NONE

    def lost(self, now_s: float | None = None) -> bool:
        """The verdict on a packet (at ``now_s``, any clock in seconds, for a clocked
        chain; without it a clocked chain moves per packet only)."""
        m = self.model
        if m.kind is LossKind.NONE:
            return False
        u = self._rng.random
        if m.kind is LossKind.BERNOULLI:
            return u() < m.p
        if m.slot_s and now_s is not None:
            self._catch_up(now_s)
        drop = u() >= (m.h if self._bad else m.k)
        if self._bad:
            if u() < m.r:
                self._bad = False
        elif u() < m.p:
            self._bad = True
        return drop

    def _catch_up(self, now_s: float) -> None:
        """Move the chain by the slots between its clock and ``now_s``; then count this
        packet's slot."""
        slot = self.model.slot_s
        clock = now_s if self._clock_s is None else self._clock_s
        if now_s > clock:
            n = int((now_s - clock) / slot)
            if n:
                self._bad = self._rng.random() < self.model.bad_after(self._bad, n)
                clock += n * slot
        self._clock_s = clock + slot
