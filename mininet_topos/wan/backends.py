"""Choosing a WAN link's backend: the delay line or netem (``auto`` picks).
"""
from __future__ import annotations

from typing import Any

from ..delayline import WanError, WanParams
from .delayline_link import WanLink
from .loss_backends import LossBackend
from .netem import (
    NetemUnavailableError,
    NetemWan,
    netem_available,
    netem_unavailable_reason,
    netem_unsupported,
)
from .params import params_from

BACKENDS = ("auto", "delayline", "netem")


def make_wan_link(a_iface: str, b_iface: str, *, backend: str = "auto",
                  netns: str | None = None, params: WanParams | None = None,
                  loss_backend: LossBackend | None = None, realtime: bool = True,
                  **shaping: Any) -> WanLink | NetemWan:
    """A WAN link (not started) by the chosen backend.

    ``"delayline"``: :class:`WanLink`.  ``"netem"``: :class:`NetemWan`, or
    :class:`NetemUnavailableError` with the kernel's answer where netem is missing.
    ``"auto"``: netem when the kernel has it and it can apply the parameters exactly as
    the delay line would (no loss backend, no jitter without reorder, no ``seed``: a
    seeded link is asked to replay its loss sequence, which netem cannot), else the
    delay line.
    """
    name = f"{a_iface}-{b_iface}"
    if backend not in BACKENDS:
        raise WanError(f"WAN link {name}: backend {backend!r} is not one of "
                       f"{', '.join(BACKENDS)}")
    base = params_from(name, params, shaping)
    if backend == "netem":
        reason = netem_unavailable_reason()
        if reason is not None:
            raise NetemUnavailableError(f"WAN link {name}: backend 'netem' asked for, but "
                                        f"the kernel has no netem: {reason}")
        if loss_backend is not None:
            raise WanError(f"WAN link {name}: a loss backend works with the delay line "
                           "only; netem applies the loss itself")
        return NetemWan(a_iface, b_iface, netns=netns, params=base)
    if (backend == "auto" and loss_backend is None and base.seed is None
            and netem_unsupported(base) is None and netem_available()):
        return NetemWan(a_iface, b_iface, netns=netns, params=base)
    return WanLink(a_iface, b_iface, netns=netns, params=base, loss_backend=loss_backend,
                   realtime=realtime)
