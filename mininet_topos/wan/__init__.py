"""WAN links for the test bed: delay, jitter, rate and loss between two interfaces.

Why: experiments across datacenters need long, lossy links, and this kernel has no
netem.  :class:`WanLink` runs the user-space delay line (:mod:`.delayline`) between two
interfaces — in the root namespace or a named one — and hands its parameters and
counters back.  :class:`MininetWanLink` is the same as a Mininet link class: it puts two
veth pairs and a small private namespace between the two nodes::

    node1:intf1 <-veth-> wana [delay line in its namespace] wanb <-veth-> node2:intf2

Loss is applied inside the delay line by default (a per-direction Bernoulli or
Gilbert-Elliott process on the wire, after serialisation, seeded, counted exactly).
The eBPF dropper of ``ebpf.loss`` can take it instead (``loss_backend=EbpfLossBackend()``)
on links carrying plain IPv4; see :class:`EbpfLossBackend` for why it is not the default.

Two delay lines speak the same protocol: the Python one (every parameter, ~100 Mbit/s)
and the native one (``native/delayline.c``: Gbit/s, no loss).  ``WanLink(...,
line="auto"|"native"|"python")``; ``auto`` takes the native line when a loss backend
applies the loss (:mod:`.delayline_link`).

Use::

    with WanLink("wana", "wanb", delay_ms=10, jitter_ms=1, rate_mbps=100,
                 loss=LossModel.bursty(0.01), netns="wan1") as wan:
        ...
        wan.params()          # the WanParams configured
        wan.applied_params()  # the same, read back from the running delay line
        wan.stats()           # per-direction counters: rx, tx, lost, queue drops, lateness
        wan.update(loss=LossModel.none())   # live change

Where the kernel has netem, :class:`NetemWan` does the same job in the kernel (netem on
both egresses, a u32/mirred redirect between the two interfaces), with the same methods.
:func:`make_wan_link` and :class:`MininetWanLink` take ``backend="auto"|"delayline"|
"netem"``: ``auto`` (the default) uses netem when :func:`netem_available` says the
kernel has it and netem can apply the parameters as the delay line would, else the
delay line; ``netem`` on a kernel without it raises :class:`NetemUnavailableError`
quoting the kernel's answer.

One module per backend: :mod:`.delayline_link` (:class:`WanLink`), :mod:`.netem`
(:class:`NetemWan`), :mod:`.loss_backends` (:class:`EbpfLossBackend`),
:mod:`.mininet_links` (the Mininet link classes), :mod:`.backends`
(:func:`make_wan_link`), :mod:`.params` (parameters of a topology link).
"""
from __future__ import annotations

from ..delayline import WanError, WanParams
from .backends import BACKENDS, make_wan_link
from .delayline_link import WanLink
from .loss_backends import EbpfLossBackend, LossBackend
from .mininet_links import MininetMtuLink, MininetWanLink
from .netem import (
    NetemUnavailableError,
    NetemWan,
    netem_args,
    netem_available,
    netem_params_from_tc,
    netem_unavailable_reason,
    netem_unsupported,
)
from .params import wan_params_for

__all__ = [
    "BACKENDS",
    "EbpfLossBackend",
    "LossBackend",
    "MininetMtuLink",
    "MininetWanLink",
    "NetemUnavailableError",
    "NetemWan",
    "WanError",
    "WanLink",
    "WanParams",
    "make_wan_link",
    "netem_args",
    "netem_available",
    "netem_params_from_tc",
    "netem_unavailable_reason",
    "netem_unsupported",
    "wan_params_for",
]
