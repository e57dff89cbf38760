"""User-space link emulation at the receiving endpoint: loss models and a delay line.

Why in user space: this kernel has no netem, and the project's eBPF dropper may not be
attached in every run.  Dropping at the receiver, before any protocol processing,
emulates silent loss on the wire (a sender never learns about it), and holding packets
for a fixed one-way delay on each side gives the round-trip time of a WAN link.
Seeded generators make the loss pattern reproducible, so tests can compare the
retransmission counts with the exact losses injected.
"""
from __future__ import annotations

import collections
import random
from dataclasses import dataclass, field

from traffic.errors import ConfigError

__all__ = ["Bernoulli", "DelayLine", "GilbertElliott", "LossModel", "NoLoss", "parse_loss"]


class LossModel:
    """Decides per packet whether it is lost."""

    def drop(self) -> bool:  # pragma: no cover - interface
        raise NotImplementedError

    @property
    def mean_loss(self) -> float:  # pragma: no cover - interface
        raise NotImplementedError


@dataclass(slots=True, kw_only=True)
class NoLoss(LossModel):
    def drop(self) -> bool:
        return False

    @property
    def mean_loss(self) -> float:
        return 0.0


@dataclass(slots=True, kw_only=True)
class Bernoulli(LossModel):
    """Independent loss with probability ``p``."""

    p: float
    seed: int = 1
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not 0.0 <= self.p < 1.0:
            raise ConfigError(f"Bernoulli loss: p={self.p!r} outside [0, 1)")
        self._rng = random.Random(self.seed)

    def drop(self) -> bool:
        return self._rng.random() < self.p

    @property
    def mean_loss(self) -> float:
        return self.p


@dataclass(slots=True, kw_only=True)
class GilbertElliott(LossModel):
    """Two-state bursty loss: good->bad with ``p``, bad->good with ``r``.

    Loss probability is ``1 - k`` in the good state and ``1 - h`` in the bad state
    (the usual netem parameter names).
    """

    p: float
    r: float
    h: float = 0.0
    k: float = 1.0
    seed: int = 1
    _bad: bool = field(init=False, default=False)
    _rng: random.Random = field(init=False, repr=False)

    def __post_init__(self) -> None:
        for name in ("p", "r", "h", "k"):
            v = getattr(self, name)
            if not 0.0 <= v <= 1.0:
                raise ConfigError(f"Gilbert-Elliott loss: {name}={v!r} outside [0, 1]")
        if self.r == 0.0:
            raise ConfigError("Gilbert-Elliott loss: r=0 never leaves the bad state")
        self._rng = random.Random(self.seed)

    def drop(self) -> bool:
        rnd = self._rng.random
        if self._bad:
            if rnd() < self.r:
                self._bad = False
        elif rnd() < self.p:
            self._bad = True
        keep = self.h if self._bad else self.k
        return rnd() >= keep

    @property
    def mean_loss(self) -> float:
        pi_bad = self.p / (self.p + self.r)
        return pi_bad * (1 - self.h) + (1 - pi_bad) * (1 - self.k)


def parse_loss(spec: str, *, seed: int = 1) -> LossModel:
    """Parse ``none``, ``P`` / ``bernoulli:P`` or ``ge:p,r[,h[,k]]`` (fractions)."""
    s = spec.strip().lower()
    try:
        if s in ("", "none", "0"):
            return NoLoss()
        if s.startswith("ge:"):
            vals = [float(v) for v in s[3:].split(",")]
            if not 2 <= len(vals) <= 4:
                raise ConfigError(f"loss spec {spec!r}: ge needs p,r[,h[,k]]")
            names = ("p", "r", "h", "k")
            return GilbertElliott(seed=seed, **dict(zip(names, vals)))
        s = s.removeprefix("bernoulli:")
        return Bernoulli(p=float(s), seed=seed)
    except ValueError as e:
        if isinstance(e, ConfigError):
            raise
        raise ConfigError(
            f"loss spec {spec!r}: {e}; expected none, P, bernoulli:P or ge:p,r[,h[,k]]"
        ) from None


@dataclass(slots=True, kw_only=True)
class DelayLine:
    """FIFO that releases each packet ``delay_s`` after it arrived (constant delay)."""

    delay_s: float = 0.0
    _q: collections.deque = field(default_factory=collections.deque)

    def __post_init__(self) -> None:
        if not 0.0 <= self.delay_s <= 10.0:
            raise ConfigError(f"delay line: delay_s={self.delay_s!r} outside 0..10 s")

    def push(self, now: float, item: object) -> None:
        self._q.append((now + self.delay_s, item))

    def pop_due(self, now: float) -> list:
        out = []
        q = self._q
        while q and q[0][0] <= now:
            out.append(q.popleft()[1])
        return out

    def next_due(self) -> float | None:
        return self._q[0][0] if self._q else None

    def __len__(self) -> int:
        return len(self._q)
