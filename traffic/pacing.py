"""Per-QP token bucket: the rate limiter that rate feedback (HPCC, DCQCN) adjusts.

Why a token bucket and not inter-packet gaps: the sender loop wakes at millisecond
granularity, so it must be allowed to send a small burst that catches up with the
configured rate; the bucket depth bounds that burst.  A rate change takes effect on the
next refill: tokens earned at the old rate are kept, but capped at the new depth.

Why 5 ms deep: on a busy host a sleeping sender is often woken 2-4 ms late (measured
with ``EndpointCounters.stalls``); every millisecond of lateness beyond the depth is
rate lost for good.  With 2 ms the bench's sender lost much of its rate on
a loaded 2-core machine (single runs up to half); 5 ms covers the usual wake-up latency.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from traffic.errors import ConfigError

__all__ = ["TokenBucket"]

MIN_RATE_BPS = 1_000.0
MAX_RATE_BPS = 400e9


@dataclass(slots=True, kw_only=True)
class TokenBucket:
    """Bytes-per-second bucket; ``burst_s`` worth of bytes (at least two packets) deep."""

    rate_bps: float
    burst_s: float = 0.005
    min_burst_bytes: int = 2 * 1100
    tokens: float = 0.0
    last_t: float = 0.0
    depth: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.set_rate(self.rate_bps, self.last_t)
        self.tokens = self.depth

    def set_rate(self, rate_bps: float, now: float) -> None:
        """Change the rate at time ``now``; tokens earned so far are kept (capped)."""
        if not MIN_RATE_BPS <= rate_bps <= MAX_RATE_BPS:
            raise ConfigError(
                f"token bucket: rate_bps={rate_bps!r} outside {MIN_RATE_BPS:g}..{MAX_RATE_BPS:g}"
            )
        self.refill(now)
        self.rate_bps = float(rate_bps)
        self.depth = max(self.min_burst_bytes, self.rate_bps / 8 * self.burst_s)
        self.tokens = min(self.tokens, self.depth)

    def refill(self, now: float) -> None:
        if now > self.last_t:
            self.tokens = min(self.depth, self.tokens + (now - self.last_t) * self.rate_bps / 8)
            self.last_t = now

    def try_take(self, nbytes: int, now: float) -> bool:
        """Take ``nbytes`` if available.  A packet larger than the bucket is deep (an
        FEC repair packet behind a one-packet pacer) goes once the bucket is full and
        leaves it in debt, which the next packets wait out: the rate stays exact, and
        such a packet cannot wait forever."""
        self.refill(now)
        if self.tokens >= min(nbytes, self.depth):
            self.tokens -= nbytes
            return True
        return False

    def wait_s(self, nbytes: int) -> float:
        """Seconds until ``nbytes`` can be taken (0 when now)."""
        need = min(nbytes, self.depth) - self.tokens
        return 0.0 if need <= 0 else need * 8 / self.rate_bps
