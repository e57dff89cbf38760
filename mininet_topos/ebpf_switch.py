"""The Mininet switch kind ``ebpf``: softswitch's eBPF target as a test-bed switch.

:class:`EbpfSoftSwitch` is a :class:`~mininet_topos.switches.SoftSwitch` node started
with ``--target ebpf``: the P4 program runs as a tc classifier on every port of the
node, frames never cross into Python, and the P4Runtime server (same protocol, same
controller) writes the program's tables into BPF maps.  Queue rates and depths become
the program's virtual queues plus kernel shaping (HTB) of the same ports.

Why the node's namespace gets a name here: the switch process shapes its ports with
``tc -n NAME``, which takes names under ``/var/run/netns`` only, not the
``/proc/PID/ns/net`` path a Mininet node has.  ``ip netns attach`` names the node's
namespace for the switch's lifetime; the name goes when the switch stops (the
namespace itself is Mininet's, and goes with the node).

Teardown: the switch process detaches its filters and unloads its program and maps
on SIGTERM; what a killed process left on the ports (clsact with its filters, the
shaping qdisc) is removed by the node when the process has gone, and noted in the
switch's log.  :func:`attached_programs` and :func:`kernel_objects` let tests check
that nothing is left in the kernel.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import re
import subprocess
from typing import Any

from common.kernel.netns import unique_name
from mininet_topos.switches import P4SwitchError, SoftSwitch

__all__ = ["EbpfSoftSwitch", "attached_programs", "kernel_objects", "stats_ports"]

_PROG_ID = re.compile(r"\bid (\d+)\b")


class EbpfSoftSwitch(SoftSwitch):
    """softswitch ``--target ebpf`` as a Mininet switch in its own namespace."""

    target = "softswitch (ebpf)"

    def __init__(self, name: str, **params: Any) -> None:
        if params.get("pcap_dir"):
            raise P4SwitchError(f"{name}: pcap_dir: the eBPF target captures no frames "
                                "(capture on the node's interfaces instead)")
        self.netns_name: str | None = None
        super().__init__(name, **params)

    def argv(self) -> list[str]:
        argv = super().argv()
        if self.netns_name:   # tc -n needs a name (see the module's docstring)
            argv[argv.index("--netns") + 1] = self.netns_name
        return argv + ["--target", "ebpf"]

    def start(self, controllers: Any) -> None:
        name = unique_name("p4ebpf", 40)
        r = subprocess.run(["ip", "netns", "attach", name, str(self.pid)], capture_output=True,
                           text=True, check=False)
        if r.returncode:
            raise P4SwitchError(f"{self.name}: cannot name its namespace for tc "
                                f"(ip netns attach {name} {self.pid}): {r.stderr.strip()}")
        self.netns_name = name
        try:
            super().start(controllers)
        except BaseException:
            self._unname()
            raise

    def _end(self) -> None:
        had = self.proc is not None
        super()._end()
        if had and self.shell is not None:
            self._sweep()
        self._unname()

    def _sweep(self) -> None:
        """Remove what a killed switch process left on the node's ports (its filters keep
        its program and maps alive while the interfaces exist)."""
        left = []
        for port, ifname in sorted(self.data_ports().items()):
            if "p4_" in self.cmd(f"tc filter show dev {ifname} ingress 2>/dev/null"):
                left.append(f"{ifname}: tc filter")
                self.cmd(f"tc qdisc del dev {ifname} clsact 2>/dev/null")
            if self.queue_rates_mbps.get(port, 0) > 0 \
                    and "htb" in self.cmd(f"tc qdisc show dev {ifname} root 2>/dev/null"):
                left.append(f"{ifname}: shaping")
                self.cmd(f"tc qdisc del dev {ifname} root 2>/dev/null")
        # the CPU port's veth pair (softswitch.targets.ebpf.cpu_port): the program sits on
        # its inner end; the node's namespace holds no other switch's
        links = self.cmd("ip -o link show 2>/dev/null")
        for ifname in re.findall(r"^\d+: (p4cpu\w+o)[@:]", links, re.MULTILINE):
            left.append(f"{ifname}: CPU port")
            self.cmd(f"ip link del {ifname} 2>/dev/null")
        if left:
            self._note(f"removed what the stopped switch process left: {', '.join(left)}")

    def _note(self, line: str) -> None:
        with contextlib.suppress(OSError), open(self.log_file, "a", encoding="utf-8") as f:
            f.write(f"[{self.name}] {line}\n")

    def _unname(self) -> None:
        name, self.netns_name = self.netns_name, None
        if name:
            subprocess.run(["ip", "netns", "delete", name], capture_output=True, check=False)

    def stats(self) -> dict[str, Any]:
        """The running switch's statistics, with ``ports`` as the Python target names them."""
        st = super().stats()
        return {**st, "name": self.name, "ports": stats_ports(st, self.name)}

    def programs(self) -> dict[str, list[int]]:
        """Interface -> ids of the BPF programs attached to its tc ingress."""
        return attached_programs(self, self.data_ports().values())


def stats_ports(st: dict[str, Any], switch: str) -> list[dict[str, Any]]:
    """Per-port rows of a statistics file as the Python target writes them (``port``,
    ``ifname``, ``tx_packets``, ``tail_drops``, ``queue_high_water``...): the Python
    target's own ``ports``, or the eBPF target's per-queue counters (its interfaces
    are the test bed's ``sN-ethP``; packets sent = packets its virtual queue took in,
    which counts only paced ports)."""
    if "ports" in st or st.get("target") != "ebpf":
        return list(st.get("ports", []))
    rows = []
    for port, q in sorted((st.get("queues") or {}).items(), key=lambda kv: int(kv[0])):
        rows.append({"port": int(port), "ifname": f"{switch}-eth{port}",
                     "tx_packets": int(q.get("enqueued", 0)), "tail_drops": int(q.get("tail_drops", 0)),
                     "queue_high_water": int(q.get("queue_high_water", 0)),
                     "queue_rate_bps": float(q.get("queue_rate_bps", 0.0)),
                     "queue_size_pkts": int(q.get("queue_size_pkts", 0))})
    return rows


def attached_programs(node: Any, ifnames: Any) -> dict[str, list[int]]:
    """Interface -> ids of the programs on its tc ingress, read in ``node``."""
    return {i: [int(m) for m in _PROG_ID.findall(node.cmd(f"tc filter show dev {i} ingress 2>&1"))]
            for i in ifnames}


def kernel_objects(prog_ids: Any) -> dict[str, set[int]]:
    """The programs of ``prog_ids`` that exist and every map they use, by kernel id."""
    from softswitch.backends.ebpf import kernel as K
    progs, maps = set(), set()
    for pid in prog_ids:
        attr = K._GetIdAttr(id=int(pid))
        fd = K._libc.syscall(K._NR_BPF, K.BPF_PROG_GET_FD_BY_ID, ctypes.byref(attr),
                             ctypes.sizeof(attr))
        if fd < 0:
            continue
        try:
            progs.add(int(pid))
            maps.update(K.program_map_ids(fd))
        finally:
            os.close(fd)
    return {"prog": progs, "map": maps}


def objects_alive(objs: dict[str, set[int]]) -> list[str]:
    """Which of ``objs`` (from :func:`kernel_objects`) the kernel still has."""
    from softswitch.backends.ebpf.kernel import object_exists
    return [f"{kind} {i}" for kind, ids in objs.items() for i in sorted(ids) if object_exists(kind, i)]
