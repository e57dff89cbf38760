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
from dataclasses import dataclass, field

from common.loss import LossModel, LossProcess, LossSpecError
from traffic.errors import ConfigError

__all__ = ["DelayLine", "parse_loss"]


def parse_loss(spec: str, *, seed: int = 1) -> LossProcess:
    """The seeded loss of ``none``, ``P`` / ``bernoulli:P`` or ``ge:p,r[,h[,k]]``
    (fractions; the model and its sampler are :mod:`common.loss`)."""
    try:
        model = LossModel.parse(spec)
    except LossSpecError as e:
        raise ConfigError(str(e)) from None
    return LossProcess(model, seed=seed)


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
