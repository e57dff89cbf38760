"""Kernel shaping of the eBPF switch's ports: the tc commands that pace a port at its
queue's rate, so the departures the program computes for its virtual queues are the
real ones (``softswitch.backends.ebpf.queues``).

The switch process's job, not the code generator's: it runs them in the ports'
namespace when a port is paced and undoes them when the switch stops.
"""
from __future__ import annotations

from common.kernel.shaping import ShapingError, shaping_commands
from softswitch.backends.ebpf.queues import KERNEL_FIFO_FACTOR
from softswitch.switchd.errors import OptionError


def shaping_argv(ifname: str, rate_bps: float, depth_pkts: int, netns: str | None = None
                 ) -> list[list[str]]:
    """tc commands that send `ifname`'s frames at `rate_bps` (the test bed's HTB + FIFO),
    with a FIFO large enough that the virtual queue, not the kernel, drops (the
    shaping the test bed and the BMv2 switch kind use)."""
    prefix = tc_argv(netns)
    fifo = min(depth_pkts * KERNEL_FIFO_FACTOR, (1 << 19) - 1)
    try:
        cmds = shaping_commands(ifname, rate_bps / 1e6, fifo)
    except ShapingError as exc:
        raise OptionError(f"--queue-rate on --target ebpf: {exc}") from None
    return [prefix + cmd.split()[1:] for cmd in cmds]


def unshaping_argv(ifname: str, netns: str | None = None) -> list[str]:
    return [*tc_argv(netns), "qdisc", "del", "dev", ifname, "root"]


def tc_argv(netns: str | None) -> list[str]:
    """`tc` in `netns`: a name under /var/run/netns (``tc -n``), or a path such as
    ``/proc/PID/ns/net``, which ``tc -n`` does not take (``nsenter --net``)."""
    if not netns:
        return ["tc"]
    if "/" in netns:
        return ["nsenter", f"--net={netns}", "tc"]
    return ["tc", "-n", netns]
