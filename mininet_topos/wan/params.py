"""WAN link parameters: from a topology link, or changed live, checked with the link named.

Why apart: every backend (delay line, netem, Mininet link) takes its parameters the
same way and reports a bad one the same way.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from controller.topology.model import Link

from ..delayline import WanError, WanParams


def wan_params_for(link: Link, *, seed: int | None = None, queue_pkts: int | None = None
                   ) -> WanParams:
    """The delay line parameters of a topology link (rate, delay, jitter, loss, queue)."""
    return WanParams(delay_ms=link.delay_ms, jitter_ms=link.jitter_ms,
                     rate_mbps=link.rate_mbps, loss=link.loss,
                     queue_pkts=queue_pkts if queue_pkts is not None else max(
                         link.queue_pkts, 1000),
                     seed=seed).check(f"link {link.name}")


def changed_params(params: WanParams, name: str, changes: dict[str, Any]) -> WanParams:
    """``params`` with ``changes`` applied and checked (errors name the link), for the
    live ``update`` of either backend."""
    try:
        new = dataclasses.replace(params, **changes)
    except TypeError as exc:
        raise WanError(f"WAN link {name}: {exc}") from None
    return new.check(f"WAN link {name}")


def params_from(name: str, params: WanParams | None, shaping: dict[str, Any]) -> WanParams:
    """``params`` or WanParams(**shaping) (not both), checked; errors name the link."""
    if params is not None and shaping:
        raise WanError(f"WAN link {name}: give params or shaping keywords "
                       f"({', '.join(shaping)}), not both")
    try:
        base = params if params is not None else WanParams(**shaping)
    except TypeError as exc:
        raise WanError(f"WAN link {name}: {exc}") from None
    return base.check(f"WAN link {name}")
