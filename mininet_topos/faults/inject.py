"""Applies and heals faults on a running linux-router test bed.

How each kind is made (the router ports are HTB-shaped with a pfifo, see
``common.kernel.shaping.shaping_commands``):

* ``gray_loss`` on one direction of a WAN link: the eBPF loss emulator
  (``ebpf.loss``) at tc egress of the delay line's interface facing the receiving
  router, i.e. on the wire just before the receiver's ingress: the sender counts the
  frame sent, the receiver never sees it (silent, one direction only; random or
  Gilbert-Elliott bursts with the mean asked for).
* ``rate_degraded``: the sending port's HTB class is cut to ``factor`` of its rate.
* ``link_down``: the same eBPF dropper at tc egress of *both* ports of the link drops
  every IPv4 frame (before the interface counts it), as a dead cable would; routes
  stay as they are.
* ``congestion``: a background sender inside the sending router's namespace pushes
  ``rate_mbps`` of UDP out of that port to the far router (which drops it: no route),
  so only that link direction carries it.
* ``tiny_queue``: the port's pfifo limit becomes ``queue_pkts``; the packets it drops
  meanwhile go into the ground truth (``drops``: a queue that drops nothing had no
  effect).
* ``slow_receiver`` / ``straggler``: the rank's own options (``traffic.host_faults``),
  see :func:`traffic_fault_args`.

On P4 switches (``switch``): softswitch's eBPF target shapes its ports with the same
HTB class and pfifo as the routers, so a rate degradation and congestion are made as
above; a tiny queue is the port's *virtual* queue (the one INT measures and the
program tail-drops from, ``ebpf_queue.py``) cut to ``queue_pkts``.  The Python target
paces its ports in its own process and leaves the kernel's interface unshaped: a rate
degradation there puts an HTB at ``factor`` of the line rate (with the link's FIFO
depth) on the switch port's interface, behind the switch; its queue and congestion are
not reachable from outside the process (``p4.P4_KINDS``).

Every change is undone by :meth:`Injector.heal` (also on error, by the caller's
``finally``).
"""
from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Self

from common.loss import LossModel
from controller.topology.model import Topology
from mininet_topos.faults.background import UDP_PORT
from mininet_topos.faults.spec import FaultError, FaultSpec

__all__ = ["Injector", "fifo_drops", "traffic_fault_args"]


_BACKGROUND_PRIO = 1      # before the eBPF switch's own filter (prio 7 or 8)


def traffic_fault_args(f: FaultSpec | None, rank: int, hosts: list[str],
                       start_unix: float) -> list[str]:
    """The extra ``python -m traffic`` options of ``rank`` for a host-side fault."""
    if f is None:
        return []
    window = f"{start_unix + f.onset_s:.3f}:{f.duration_s:g}"
    if f.kind == "slow_receiver" and hosts[rank] == f.target:
        return ["--fault-slow-rx", f"{window}:{f.delay_s:g}"]
    if f.kind == "straggler" and str(rank) == f.target:
        return ["--fault-straggle", f"{window}:{f.late_s:g}"]
    return []


def fifo_drops(tc_stats: str) -> int | None:
    """The packets the port's FIFO (``pfifo 10:``, see ``shaping_commands``) dropped,
    from ``tc -s qdisc show`` output; None if it has no such FIFO."""
    m = re.search(r"^qdisc pfifo 10: .*?\n\s*Sent \d+ bytes \d+ pkt \(dropped (\d+)",
                  tc_stats, re.MULTILINE)
    return int(m.group(1)) if m else None


def _ifname(node: str, port: int) -> str:
    return f"{node}-eth{port}"


@dataclass(slots=True)
class Injector:
    """Network faults on the test bed ``tb`` (a running ``experiment.Testbed``)."""

    tb: Any
    topo: Topology
    python: str = sys.executable
    switch: str = "linux-router"   # or softswitch / ebpf: see the module's docstring
    _undo: list[Any] = field(default_factory=list)
    applied: list[dict[str, Any]] = field(default_factory=list)
    drops: dict[str, int] = field(default_factory=dict)   # eBPF drops per interface
    _prepared: bool = False
    _armed: list[Any] = field(default_factory=list)   # droppers attached before the onset

    def _cmd(self, node: str, cmd: str) -> None:
        out = self.tb.net.get(node).cmd(cmd + " 2>&1; echo rc=$?").strip()
        if not out.endswith("rc=0"):
            raise FaultError(f"{node}: {cmd!r} failed: {out}")

    def _ends(self, link: str) -> tuple[str, int, str, int]:
        a, _, b = link.partition("->")
        an, _, ap = a.partition(":")
        bn, _, bp = b.partition(":")
        return an, int(ap), bn, int(bp)

    def _rate(self, sw: str, port: int) -> float:
        return float(self.topo.link_at(sw, port).rate_mbps)

    def prepare(self, f: FaultSpec, onset_unix: float) -> None:
        """Start what needs time to come up (the background sender) so that it acts at
        ``onset_unix``; :meth:`apply` then has nothing left to do for it."""
        if f.kind == "congestion":
            self._background(f, onset_unix)
        else:
            self.arm(f)

    def arm(self, f: FaultSpec) -> None:
        """Attach the eBPF droppers of a gray loss or link down now, with loss off:
        compiling takes seconds on a loaded machine, so the caller arms before it fixes
        the workload's start; the fault then starts at its onset by a map update."""
        if f.kind in ("gray_loss", "link_down") and not self._armed:
            self._armed = self._droppers(f)

    def _background(self, f: FaultSpec, onset_unix: float) -> None:
        sw, port, far, far_port = self._ends(f.target)
        if self.switch == "ebpf" and far in self.topo.switch_names:
            self._drop_background_at(far, far_port)
            self._link_depth_fifo(sw, port)
        p = self.tb.spawn(f"background-{sw}-{port}", sw, [
            self.python, "-m", "mininet_topos.faults.background", "--iface",
            _ifname(sw, port), "--rate-mbps", f"{f.rate_mbps:g}",
            "--start-at", f"{onset_unix:.3f}"])
        self._undo.append(p.stop)
        self._prepared = True

    def apply(self, f: FaultSpec) -> None:
        """Start ``f`` now (host-side kinds need nothing here)."""
        if f.kind in ("slow_receiver", "straggler"):
            return
        if f.kind in ("gray_loss", "link_down"):
            for em in self._armed or self._droppers(f):
                self._set_loss(em, f)
            self._armed = []
        elif f.kind == "rate_degraded" and self.switch == "softswitch":
            self._shape_python_port(f)
        elif f.kind == "tiny_queue" and self.switch == "ebpf":
            self._tiny_virtual_queue(f)
        elif f.kind == "rate_degraded":
            sw, port, _, _ = self._ends(f.target)
            dev, rate = _ifname(sw, port), self._rate(sw, port)
            cls = "tc class change dev {} parent 1: classid 1:1 htb rate {:g}mbit ceil {:g}mbit " \
                  "burst 4k cburst 4k"
            self._cmd(sw, cls.format(dev, rate * f.factor, rate * f.factor))
            self._undo.append(lambda: self._cmd(sw, cls.format(dev, rate, rate)))
        elif f.kind == "tiny_queue":
            sw, _, port_s = f.target.partition(":")
            dev = _ifname(sw, int(port_s))
            depth = self.topo.link_at(sw, int(port_s)).queue_pkts
            q = "tc qdisc change dev {} parent 1:1 handle 10: pfifo limit {}"
            before = self._fifo_drops(sw, dev)
            self._cmd(sw, q.format(dev, f.queue_pkts))

            def undo() -> None:   # the drops while the queue was tiny: did it bite?
                try:
                    self.drops[f"{dev} tail"] = self._fifo_drops(sw, dev) - before
                finally:
                    self._cmd(sw, q.format(dev, depth))
            self._undo.append(undo)
        elif f.kind == "congestion":
            if not self._prepared:
                self._background(f, 0.0)
        else:  # pragma: no cover - parse_fault checked the kind
            raise FaultError(f"fault kind {f.kind!r} cannot be injected")
        self.applied.append({"kind": f.kind, "target": f.target})

    def _drop_background_at(self, node: str, port: int) -> None:
        """The eBPF dropper ahead of the eBPF switch's program on the far port's ingress,
        for the background's UDP port only: the far switch drops those frames as a
        router without a route does (its P4 program would read their bytes as a link
        header and count them as the link's packets)."""
        from ebpf.loss import LossEmulator

        dev = _ifname(node, port)
        em = LossEmulator(dev, netns=self._netns_of(node), direction="ingress",
                          prio=_BACKGROUND_PRIO, udp_dport=UDP_PORT,
                          link_seq=False).attach()
        em.set_bernoulli(1.0)
        self._undo.append(em.close)

    def _link_depth_fifo(self, sw: str, port: int) -> None:
        """The eBPF switch's shaping FIFO (``KERNEL_FIFO_FACTOR`` times its virtual
        queue, so that the program, not the kernel, drops its own packets) cut to the
        link's queue depth while background frames share it, as on a router: in the
        deep FIFO the background's socket buffer filled before the FIFO did, and the
        collective's packets only waited behind it."""
        dev = _ifname(sw, port)
        m = re.search(r"pfifo 10: .*?limit (\d+)p", self.tb.net.get(sw).cmd(f"tc qdisc show dev {dev}"))
        if m is None:
            raise FaultError(f"{sw}: no pfifo 10: under {dev}: is the port shaped?")
        q = "tc qdisc change dev {} parent 1:1 handle 10: pfifo limit {}"
        self._cmd(sw, q.format(dev, self.topo.link_at(sw, port).queue_pkts))
        self._undo.append(lambda: self._cmd(sw, q.format(dev, m.group(1))))

    def _shape_python_port(self, f: FaultSpec) -> None:
        """A rate degradation behind the Python target: HTB + FIFO on its port's
        interface (unshaped until now), removed on heal."""
        from common.kernel.shaping import shaping_commands

        sw, port, _, _ = self._ends(f.target)
        dev, link = _ifname(sw, port), self.topo.link_at(sw, port)
        for cmd in shaping_commands(dev, float(link.rate_mbps) * f.factor, link.queue_pkts):
            self._cmd(sw, cmd)
        self._undo.append(lambda: self._cmd(sw, f"tc qdisc del dev {dev} root"))

    def _tiny_virtual_queue(self, f: FaultSpec) -> None:
        """An eBPF switch port's virtual queue cut to ``queue_pkts`` (its depth and tail
        drops restored / counted on heal)."""
        from mininet_topos.ebpf_switch import attached_programs
        from mininet_topos.faults.ebpf_queue import VirtualQueue, queue_map_id

        sw, _, port_s = f.target.partition(":")
        dev = _ifname(sw, int(port_s))
        progs = attached_programs(self.tb.net.get(sw), [dev])[dev]
        q = VirtualQueue(queue_map_id(progs), int(port_s))
        depth, before = q.depth, q.tail_drops
        q.set_depth(f.queue_pkts)

        def undo() -> None:
            try:
                self.drops[f"{dev} virtual queue"] = q.tail_drops - before
            finally:
                q.set_depth(depth)
        self._undo.append(undo)

    def _fifo_drops(self, node: str, dev: str) -> int:
        out = self.tb.net.get(node).cmd(f"tc -s qdisc show dev {dev}")
        n = fifo_drops(out)
        if n is None:
            raise FaultError(f"{node}: no pfifo 10: under {dev} in {out!r}")
        return n

    def _netns_of(self, node: str) -> str:
        """A name for a Mininet node's network namespace (``ip netns attach``), so the
        eBPF loader can enter it; the name goes away on heal, the namespace stays."""
        from common.kernel.netns import unique_name

        name = unique_name("f15ns")
        pid = self.tb.net.get(node).pid
        res = subprocess.run(["ip", "netns", "attach", name, str(pid)], capture_output=True,
                             text=True, check=False)
        if res.returncode != 0:
            raise FaultError(f"{node}: cannot name its namespace: {res.stderr.strip()}")
        self._undo.append(lambda: subprocess.run(["ip", "netns", "delete", name],
                                                 capture_output=True, check=False))
        return name

    def _emulator(self, ifname: str, netns: str, f: FaultSpec) -> Any:
        """The eBPF dropper at tc egress of ``ifname``; its drop count goes into
        ``applied`` when it is removed."""
        from ebpf.loss import LossEmulator

        em = LossEmulator(ifname, netns=netns, direction="egress").attach()

        def close() -> None:
            with contextlib.suppress(Exception):
                c = em.counters()
                self.drops[f"{ifname}"] = int(c.dropped)
                self.drops[f"{ifname} matched"] = int(c.matched)
            em.close()
        self._undo.append(close)
        return em

    def _droppers(self, f: FaultSpec) -> list[Any]:
        """The eBPF droppers of a gray loss or link down, attached with loss off."""
        if f.kind == "link_down":
            a, ap, b, bp = self._ends(f.target)
            return [self._emulator(_ifname(node, port), self._netns_of(node), f)
                    for node, port in ((a, ap), (b, bp)) if node in self.topo.switch_names]
        return [self._gray_loss(f)]

    @staticmethod
    def _set_loss(em: Any, f: FaultSpec) -> None:
        if f.kind == "link_down":
            em.set_bernoulli(1.0)
        elif f.model == "bursty":  # mean burst length 1 / r, bad share = the mean loss
            em.set_model(LossModel.bursty(f.loss, f.burst_pkts))
        else:
            em.set_bernoulli(f.loss)

    def _gray_loss(self, f: FaultSpec) -> Any:
        a, ap, b, bp = self._ends(f.target)
        for link in self.tb.net.links:
            if getattr(link, "wan", None) is None:
                continue
            i1, i2 = link.intf1, link.intf2
            ends = ((i1.node.name, i1.node.ports[i1]), (i2.node.name, i2.node.ports[i2]))
            if ends == ((a, ap), (b, bp)):
                mid = link._mid + "b"       # the delay line's side facing node2 (= b)
            elif ends == ((b, bp), (a, ap)):
                mid = link._mid + "a"
            else:
                continue
            return self._emulator(mid, link._ns.name, f)
        raise FaultError(f"gray_loss on {f.target}: only WAN links (delay lines) take silent "
                         "loss on the linux-router test bed; between routers on one veth "
                         "the kernel counts a frame before any hook can drop it")

    def heal(self) -> None:
        """Undo every change, newest first; keeps going past failures (reports the first)."""
        first: Exception | None = None
        while self._undo:
            undo = self._undo.pop()
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - undo the rest, then report
                first = first or exc
        if first is not None:
            raise FaultError(f"healing a fault: {first}")

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(FaultError):
            self.heal()
