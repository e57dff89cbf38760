"""Where a WAN link's loss is drawn: a backend that drops frames leaving an interface.

The delay line applies loss itself by default; :class:`EbpfLossBackend` hands it to
the eBPF dropper of ``ebpf.loss`` instead.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Protocol

from common.loss import LossModel


class LossBackend(Protocol):
    """Something that drops frames leaving ``ifname`` in namespace ``netns``.

    ``attach`` returns a handle with ``close()``; the WAN link then runs its delay line
    without loss and closes the handle on stop.
    """

    def attach(self, ifname: str, netns: str | None, model: LossModel,
               seed: int | None) -> Any: ...


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class EbpfLossBackend:
    """Loss by the eBPF dropper of ``ebpf.loss`` at tc egress of the delay line's
    outgoing interface, instead of inside the delay line.

    Limits (why the in-line dropper is the default): the eBPF program only considers
    IPv4 frames, so frames carrying the link sequence header (fabric and WAN links
    between switches) always pass, and it draws from the kernel's random numbers, so
    ``seed`` has no effect.  It suits links that carry plain IPv4 (host to host).
    """

    udp_only: bool = False

    def attach(self, ifname: str, netns: str | None, model: LossModel,
               seed: int | None) -> Any:
        from ebpf.loss import LossEmulator

        em = LossEmulator(ifname, netns=netns, direction="egress",
                          udp_only=self.udp_only).attach()
        try:
            em.set_model(model)
        except BaseException:
            em.close()
            raise
        return em
