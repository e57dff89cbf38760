"""The scoring harness on P4 switches (softswitch): places from INT paths, telemetry
from the controller's exports.

Why: on kernel routers nobody knows which ECMP path a flow took (the warm-up infers it
from port rates); on P4 switches every flow's INT records name its path hop by hop, and
the controller exports them (``csv/int_flow.csv``) with the links' sequence-counter
loss (``csv/link_loss.csv``) and the hops' queues (``csv/int_hop.csv``).  The warm-up's
INT paths say exactly which link directions each rank pair crosses, so faults go on
them, and the diagnosis weighs the INT path of each pair instead of every ECMP path.

Kinds injected on both targets: gray loss on a WAN direction (the eBPF dropper on the
delay line, as on kernel routers), a link down (eBPF droppers at tc egress of both
switch ports: softswitch sends through the kernel's egress path), a rate degradation
(an HTB behind the port, ``inject.py``), a slow receiver and a straggler (the ranks'
own options).  On the eBPF target also congestion (the routers' background sender:
its ports have the routers' HTB and FIFO) and a tiny queue (its virtual queue, which
the harness reads back as the switches' tail drops, :class:`PortDropPoller`).  The
Python target's queues live in its process, set only when it starts: no tiny queue,
and background frames out of its unshaped port would congest nothing but the far
switch's Python loop.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.diagnose.evidence import Telemetry, load_telemetry
from controller.topology.model import LinkRole, Topology

__all__ = ["P4_KINDS", "PortDropPoller", "controller_telemetry", "int_crossings",
           "int_places", "wait_for_loss_export"]

P4_KINDS: dict[str, tuple[str, ...]] = {
    "softswitch": ("gray_loss", "link_down", "rate_degraded", "slow_receiver", "straggler"),
    "ebpf": ("gray_loss", "rate_degraded", "link_down", "congestion", "tiny_queue",
             "slow_receiver", "straggler"),
}


@dataclass(slots=True)
class PortDropPoller:
    """The switches' drops per port and the ranks' hosts' receive-buffer drops over
    time: switches from the statistics files they rewrite every sample interval
    (``SoftSwitch.stats``: tail drops of the traffic manager's queues, and on the
    Python target the frames the kernel dropped on its full receive sockets), hosts
    from their network namespace's UDP counters (``/proc/PID/net/snmp``
    ``RcvbufErrors``: datagrams the kernel dropped because the rank's socket was full).

    Why here: the controller exports INT and link loss, not these counters, and each
    is a loss no link sequence number sees (a tail drop happens before egress stamps
    it; a frame dropped on the switch's receive socket or the host's never reached a
    counter downstream).  Without them a loss inside a Python switch looked like a slow
    receiver, and a receiver that overflowed its socket like one that was only late."""

    switches: list[Any]
    interval_s: float = 0.2
    # host name -> PID of a process in its network namespace (Mininet's shell)
    hosts: dict[str, int] = field(default_factory=dict)
    drops: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    rx_drops: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    # the packets each port's queue may hold (a tiny queue fault shrinks it)
    sizes: dict[tuple[str, int], list[tuple[float, int]]] = field(default_factory=dict)
    host_drops: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    _last: float = 0.0

    def poll(self) -> None:
        now = time.time()
        if now - self._last < self.interval_s:
            return
        self._last = now
        for sw in self.switches:
            for prt in _stats_ports(sw):
                key = (sw.name, int(prt["port"]))
                self.drops.setdefault(key, []).append((now, int(prt.get("tail_drops", 0))))
                if "rx_socket_drops" in prt:
                    self.rx_drops.setdefault(key, []).append(
                        (now, int(prt["rx_socket_drops"])))
                if prt.get("queue_size_pkts"):
                    self.sizes.setdefault(key, []).append((now, int(prt["queue_size_pkts"])))
        for host, pid in self.hosts.items():
            n = udp_rcvbuf_errors(pid)
            if n is not None:
                self.host_drops.setdefault(host, []).append((now, n))

    def since(self, t: float) -> dict[tuple[str, int], list[tuple[float, int]]]:
        return {k: [x for x in v if x[0] >= t] for k, v in self.drops.items()}


def udp_rcvbuf_errors(pid: int) -> int | None:
    """``Udp: RcvbufErrors`` of the network namespace process ``pid`` lives in (None:
    unreadable, e.g. the process is gone)."""
    try:
        lines = Path(f"/proc/{pid}/net/snmp").read_text().splitlines()
    except OSError:
        return None
    udp = [ln.split()[1:] for ln in lines if ln.startswith("Udp:")]
    if len(udp) < 2 or "RcvbufErrors" not in udp[0]:
        return None
    try:
        return int(udp[1][udp[0].index("RcvbufErrors")])
    except (ValueError, IndexError):
        return None


def _stats_ports(sw: Any) -> list[dict[str, Any]]:
    """A switch's per-port statistics; none while its file is being rewritten (the
    next poll reads it)."""
    from softswitch.switchd.errors import SwitchdError

    try:
        return list(sw.stats()["ports"])
    except (SwitchdError, KeyError, TypeError, ValueError):
        return []


def last_loss_export(out_dir: Path) -> float | None:
    """Unix time of the newest bin in the controller's ``csv/link_loss.csv`` (None:
    none yet)."""
    f = Path(out_dir) / "csv" / "link_loss.csv"
    try:
        with f.open("rb") as fh:
            fh.seek(max(0, f.stat().st_size - 4096))
            lines = fh.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines[1:] if len(lines) > 1 else []):
        head = line.split(",", 1)[0]
        if head.isdigit():
            return int(head) / 1e9
    return None


def wait_for_loss_export(out_dir: Path, until_unix: float, *, timeout_s: float,
                         poll_s: float = 0.2) -> bool:
    """Wait until the controller exported link loss for a bin at or after
    ``until_unix`` (the links' counters are read every few seconds on a loaded machine,
    so the last bins of a trial come late); False when ``timeout_s`` passed first."""
    deadline = time.monotonic() + timeout_s
    while True:
        t = last_loss_export(out_dir)
        if t is not None and t >= until_unix:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)


def controller_telemetry(topo: Topology, out_dir: Path, *, since_unix: float,
                         drops: PortDropPoller | None = None) -> Telemetry:
    """The controller's exports under ``out_dir``, samples at or after ``since_unix``
    (with the switches' tail drops ``drops`` polled)."""
    tel = load_telemetry(out_dir, topo)
    if drops is not None:
        tel.port_drops, tel.port_rx_drops = drops.drops, drops.rx_drops
        tel.port_sizes = drops.sizes
        tel.host_drops = drops.host_drops
    return tel.since(since_unix)


def int_crossings(topo: Topology, tel: Telemetry, ring: tuple[str, ...]
                  ) -> dict[str, list[str]]:
    """Component -> the ring pairs (``"h1->h3"``) whose INT paths cross it: directed
    links (host links too), switch egress ports and the receiving hosts, named as the
    diagnosis names them.  Pairs INT did not see cross nothing."""
    ip = {h.name: h.ipv4 for h in topo.hosts}
    switches = set(topo.switch_names)
    n = len(ring)
    out: dict[str, set[str]] = {}
    for r in range(n if n > 1 else 0):
        src, dst = ring[r], ring[(r + 1) % n]
        pair = f"{src}->{dst}"
        seen = {f.path for f in tel.flows if f.src == ip[src] and f.dst == ip[dst] and f.path}
        if seen:
            out.setdefault(dst, set()).add(pair)
        for p in seen:
            for link in p:
                out.setdefault(link, set()).add(pair)
                near = link.split("->")[0]
                if near.split(":")[0] in switches:
                    out.setdefault(near, set()).add(pair)
    return {k: sorted(v) for k, v in sorted(out.items())}


def int_places(topo: Topology, tel: Telemetry, ring: tuple[str, ...]
               ) -> dict[str, list[str]]:
    """Where each kind may go on P4 switches: WAN directions (gray loss) and
    switch-to-switch directions (link down, rate degradation, congestion) on the pairs'
    INT paths, the hosts receiving from a pair, the ranks; a tiny queue at the first
    switch's egress of a pair's path, where the sender's bursts arrive faster than the
    port sends (as on kernel routers, ``queueing.py``)."""
    crossed = int_crossings(topo, tel, ring)
    ip = {h.name: h.ipv4 for h in topo.hosts}
    first: set[str] = set()
    for r in range(len(ring) if len(ring) > 1 else 0):
        src, dst = ring[r], ring[(r + 1) % len(ring)]
        for f in tel.flows:
            if f.src == ip[src] and f.dst == ip[dst] and len(f.path) >= 2:
                first.add(f.path[1].split("->")[0])
    links, wan = [], []
    for ln in topo.links:
        if ln.role == LinkRole.HOST:
            continue
        for near, far in ((ln.a, ln.b), (ln.b, ln.a)):
            name = f"{near}->{far}"
            if name in crossed:
                links.append(name)
                if ln.role == LinkRole.WAN:
                    wan.append(name)
    fabric = sorted(links)
    return {"gray_loss": sorted(wan), "link_down": fabric, "rate_degraded": fabric,
            "congestion": fabric, "tiny_queue": sorted(first),
            "slow_receiver": [h for h in ring if h in crossed],
            "straggler": [str(r) for r in range(len(ring))]}
