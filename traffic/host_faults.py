"""Host-side faults a rank can inject into itself: a slow receiver and a straggler.

Why in the rank: these faults are not the network's, so the test bed cannot make them
with tc; a slow receiver host processes every packet it receives late (its CPU or
receive path is slow: data *and* the ACKs of its own sends wait), a straggler rank
posts each collective step late although its input has arrived.  Each is a window
in wall-clock time, ``UNIX_START:DURATION:SECONDS`` on the command line
(``--fault-slow-rx``, ``--fault-straggle``), so the experiment can place its onset.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from traffic.errors import ConfigError

__all__ = ["FaultWindow", "HostFaults", "parse_window"]


@dataclass(frozen=True, slots=True)
class FaultWindow:
    start_unix: float
    duration_s: float
    value_s: float        # receive delay, or how late each step is posted

    def active(self, unix_now: float) -> bool:
        return self.start_unix <= unix_now < self.start_unix + self.duration_s


def parse_window(text: str, what: str) -> FaultWindow:
    try:
        a, d, v = (float(x) for x in text.split(":"))
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected UNIX_START:DURATION:SECONDS") from None
    if a < 0 or not 0 < d <= 86400 or not 0 < v <= 10:
        raise ConfigError(f"{what} {text!r}: start >= 0, duration in (0, 86400], "
                          "seconds in (0, 10]")
    return FaultWindow(a, d, v)


@dataclass(slots=True)
class HostFaults:
    slow_rx: FaultWindow | None = None
    straggle: FaultWindow | None = None
    offset: float = 0.0   # Unix time = endpoint clock + offset

    def bind(self, mono_now: float) -> None:
        self.offset = time.time() - mono_now

    def rx_delay(self, now: float) -> float:
        w = self.slow_rx
        return w.value_s if w is not None and w.active(now + self.offset) else 0.0

    def step_delay(self, now: float) -> float:
        w = self.straggle
        return w.value_s if w is not None and w.active(now + self.offset) else 0.0
