"""The engine's environment knobs, checked before an engine starts.

Why: the C engine reads ``TN_ENGINE_*`` itself and falls back to its default on a value
it cannot use, with one line on stderr (all a C library can do), so
``TN_ENGINE_LEAD_MAX_US=2000`` runs with 60 us.  The Python API refuses such a value
instead, naming the variable, what it was and what it takes (traffic/README.md lists
the knobs).
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from traffic.errors import ConfigError

__all__ = ["ENGINE_ENV", "check_engine_env"]

#: variable -> (what it takes, the lowest and highest value; None: exactly 0 or 1)
ENGINE_ENV: dict[str, tuple[str, tuple[float, float] | None]] = {
    "TN_ENGINE_RT": ("0 (normal priority) or 1 (SCHED_FIFO, the default)", None),
    "TN_ENGINE_SPIN": ("0 (lead by the median only) or 1 (no spin budget)", None),
    "TN_ENGINE_SPIN_BUDGET": ("a share of a core, 0..1 (default 0.5)", (0.0, 1.0)),
    "TN_ENGINE_LEAD_MAX_US": ("microseconds, 20..1000 (default 60)", (20.0, 1000.0)),
    "TN_ENGINE_GSO": (("0 (one datagram per frame, the default) or 1 (UDP segmentation "
                       "offload: not through tc programs on the hosts)"), None),
}


def check_engine_env(env: Mapping[str, str] | None = None) -> None:
    """Raise :class:`ConfigError` for the first ``TN_ENGINE_*`` value the engine would
    ignore; unset or empty variables are the defaults."""
    env = os.environ if env is None else env
    for name, (takes, bounds) in ENGINE_ENV.items():
        raw = env.get(name, "")
        if not raw:
            continue
        if bounds is None:
            ok = raw in ("0", "1")
        else:
            try:
                value = float(raw)
            except ValueError:
                ok = False
            else:
                ok = bounds[0] <= value <= bounds[1]
        if not ok:
            raise ConfigError(f"environment: {name}={raw!r} is not valid; it takes {takes}")
