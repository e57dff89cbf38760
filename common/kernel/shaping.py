"""Kernel shaping of a switch port: the tc commands that pace an interface at a line
rate behind a FIFO of a given depth.

In ``common.kernel`` because three parts use it: the test bed shapes the software
routers' ports, ``mininet_topos.switches.Bmv2Switch`` shapes its ports this way where
BMv2 has no Thrift server to set its own queue rates and depths, and the switch's eBPF
target (``softswitch.backends.ebpf.queues``) paces its ports with it.
"""
from __future__ import annotations

__all__ = ["ShapingError", "shaping_commands"]

MAX_RATE_MBPS = 100_000
MAX_QUEUE_PKTS = (1 << 19) - 1


class ShapingError(ValueError):
    """A rate or queue depth the kernel shaper cannot take; names the interface."""


def shaping_commands(ifname: str, rate_mbps: float, queue_pkts: int) -> list[str]:
    """tc commands pacing ``ifname`` at ``rate_mbps`` with a ``queue_pkts`` FIFO.

    HTB does the pacing (burst of two full frames, so the queue forms in the FIFO, not
    in the token bucket), the pfifo child holds the queue the sampler reads.
    """
    if not 0 < rate_mbps <= MAX_RATE_MBPS:
        raise ShapingError(f"shaping {ifname}: rate {rate_mbps} Mbit/s outside (0, {MAX_RATE_MBPS}]")
    if not 1 <= queue_pkts <= MAX_QUEUE_PKTS:
        raise ShapingError(f"shaping {ifname}: queue {queue_pkts} packets outside 1..{MAX_QUEUE_PKTS}")
    return [
        f"tc qdisc replace dev {ifname} root handle 1: htb default 1",
        (f"tc class replace dev {ifname} parent 1: classid 1:1 htb rate {rate_mbps:g}mbit "
         f"ceil {rate_mbps:g}mbit burst 4k cburst 4k"),
        f"tc qdisc replace dev {ifname} parent 1:1 handle 10: pfifo limit {queue_pkts}",
    ]
