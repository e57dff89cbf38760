"""Two host namespaces joined through a middle one: the smallest real WAN path.

    h1:e1 <-veth-> m1 [mid] m2 <-veth-> e2:h2      on a fresh /24 (.1 and .2)

Why one place: the recovery sweep and the delay-line bench both put a WAN link between
``m1`` and ``m2`` and drive traffic between the hosts.  The delay line forwards frames,
not ARP answers in time, so each host has its peer as a static neighbour; the hosts'
transmit checksum offload is off, so frames leave with full checksums (the native line
does not complete them, and a sender attached straight to a line should not lean on it).
IPv6 is off in all three (no router solicitations in the counts).
"""
from __future__ import annotations

import contextlib
import secrets

from common.kernel.netns import Namespace, veth_pair

__all__ = ["WanPath"]


class WanPath:
    """``h1``, ``mid``, ``h2`` with the veths between them (``m1``, ``m2`` in ``mid``) and
    ``ips`` (h1's, h2's); :meth:`close` removes them (namespaces named ``prefix`` + a
    random tag)."""

    def __init__(self, prefix: str, subnet: str | None = None) -> None:
        if subnet is None:
            subnet = f"10.{200 + secrets.randbelow(50)}.{secrets.randbelow(250) + 1}"
        self._stack = contextlib.ExitStack()
        tag = secrets.token_hex(2)
        try:
            self.h1 = self._stack.enter_context(Namespace.create(f"{prefix}{tag}h"))
            self.h2 = self._stack.enter_context(Namespace.create(f"{prefix}{tag}h"))
            self.mid = self._stack.enter_context(Namespace.create(f"{prefix}{tag}m"))
            for ns in (self.h1, self.h2, self.mid):
                ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"])
            e1, self.m1 = veth_pair(self.h1, self.mid, prefix=f"{prefix}{tag}",
                                    addr_a=f"{subnet}.1/24")
            self.m2, e2 = veth_pair(self.mid, self.h2, prefix=f"{prefix}{tag}",
                                    addr_b=f"{subnet}.2/24")
            self.ips = (f"{subnet}.1", f"{subnet}.2")
            for ns, end, peer_ip, peer in ((self.h1, e1, self.ips[1], e2),
                                           (self.h2, e2, self.ips[0], e1)):
                ns.run(["ethtool", "-K", end.ifname, "tx", "off"])
                ns.run(["ip", "neigh", "replace", peer_ip, "lladdr", peer.mac, "dev",
                        end.ifname])
        except BaseException:
            self._stack.close()
            raise

    def close(self) -> None:
        self._stack.close()
