"""The running test bed: Mininet network, switches, samplers and node processes.

Why one owner: everything an experiment starts (network namespaces, delay lines, switch
and controller processes, samplers, traffic) must go away on every exit path, including
Ctrl-C and SIGTERM; :class:`Testbed` is a context manager whose ``__exit__`` stops the
node processes it started (by PID, TERM then KILL) before Mininet removes the nodes
and links, so nothing is left behind.

Switch kinds:

* ``linux-router``: :class:`mininet_topos.topologies.LinuxRouter`, kernel routes from
  the topology, and every router port shaped to its link rate (HTB) in front of a
  ``pfifo`` of the link's queue depth, so queues build in the switches like in the P4
  targets; the per-node :mod:`.sampler` reads their counters and backlogs.
* ``softswitch`` / ``bmv2``: the P4 switch classes of :mod:`mininet_topos.switches`
  running ``p4/int_rocev2.p4``, programmed by ``python -m controller run``; the
  test bed waits until the controller's state file shows every switch programmed.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from controller.topology import Topology, dumps_topology, port_queue_pkts, port_rates_mbps

from .errors import RunError

__all__ = ["PROJECT_ROOT", "NodeProcess", "Testbed", "shaping_commands"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
READY_STATES = ("ready", "synced", "programmed", "running")


def shaping_commands(ifname: str, rate_mbps: float, queue_pkts: int) -> list[str]:
    """tc commands pacing ``ifname`` at ``rate_mbps`` with a ``queue_pkts`` FIFO.

    HTB does the pacing (burst of two full frames, so the queue forms in the FIFO, not
    in the token bucket), the pfifo child holds the queue the sampler reads.
    """
    if not 0 < rate_mbps <= 100_000:
        raise RunError(f"shaping {ifname}: rate {rate_mbps} Mbit/s outside (0, 100000]")
    if not 1 <= queue_pkts < 1 << 19:
        raise RunError(f"shaping {ifname}: queue {queue_pkts} packets outside 1..524287")
    return [
        f"tc qdisc replace dev {ifname} root handle 1: htb default 1",
        f"tc class replace dev {ifname} parent 1: classid 1:1 htb rate {rate_mbps:g}mbit "
        f"ceil {rate_mbps:g}mbit burst 4k cburst 4k",
        f"tc qdisc replace dev {ifname} parent 1:1 handle 10: pfifo limit {queue_pkts}",
    ]


@dataclass(slots=True, kw_only=True)
class NodeProcess:
    """A process the test bed started inside a node (or beside Mininet)."""

    name: str
    node: str
    proc: subprocess.Popen
    log: Path

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit status."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode

    def tail(self, n_chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


@dataclass(slots=True, kw_only=True)
class Testbed:
    """Start ``topo`` with ``switch`` nodes; use as a context manager.

    ``logs`` receives sampler files, process logs and the controller's state;
    ``sample_interval_s`` = 0 starts no samplers.
    """

    topo: Topology
    switch: str = "linux-router"
    logs: Path
    seed: int | None = 1
    sample_interval_s: float = 0.2
    program: str = "p4/int_rocev2.p4"
    python: str = sys.executable
    ready_timeout_s: float = 120.0
    net: Any = None
    processes: list[NodeProcess] = field(default_factory=list)
    sock_dir: Path | None = None
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    # -- lifetime ---------------------------------------------------------------
    def __enter__(self) -> Testbed:
        from mininet_topos.topologies import mininet_network

        self.logs.mkdir(parents=True, exist_ok=True)
        self.sock_dir = Path(tempfile.mkdtemp(prefix="tmx"))
        try:
            switch_cls = self._switch_class()
            self.net = self._stack.enter_context(
                mininet_network(self.topo, switch=switch_cls, wan_seed=self.seed))
            self._stack.callback(self._stop_processes)
            if self.switch == "linux-router":
                self._shape_routers()
            else:
                self._start_controller()
            if self.sample_interval_s > 0:
                self._start_samplers()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop processes, then the network; safe to call twice."""
        try:
            self._stack.close()
        finally:
            self._stop_processes()
            if self.sock_dir is not None:
                for p in self.sock_dir.glob("*"):
                    with contextlib.suppress(OSError):
                        p.unlink()
                with contextlib.suppress(OSError):
                    self.sock_dir.rmdir()
                self.sock_dir = None

    def _stop_processes(self) -> None:
        while self.processes:
            self.processes.pop().stop()

    # -- switches ---------------------------------------------------------------
    def _switch_class(self) -> Any:
        if self.switch == "linux-router":
            return None  # mininet_network's default: LinuxRouter, programmed with routes
        from mininet_topos.switches import Bmv2Switch, SoftSwitch

        program = Path(self.program)
        if not program.is_absolute():
            program = PROJECT_ROOT / program
        cls = SoftSwitch if self.switch == "softswitch" else Bmv2Switch
        return partial(cls, p4_program=str(program), log_dir=str(self.logs / "switches"))

    def _shape_routers(self) -> None:
        rates, depths = port_rates_mbps(self.topo), port_queue_pkts(self.topo)
        for sw in self.topo.switch_names:
            node = self.net.get(sw)
            for port, rate in sorted(rates[sw].items()):
                if rate <= 0:
                    continue
                for cmd in shaping_commands(f"{sw}-eth{port}", rate, int(depths[sw][port])):
                    out = node.cmd(cmd + " 2>&1; echo rc=$?").strip()
                    if not out.endswith("rc=0"):
                        raise RunError(f"switch {sw}: {cmd!r} failed: {out}")

    def _start_controller(self) -> None:
        """``python -m controller run`` beside Mininet; wait until every switch is
        programmed (its state file names each switch with a ready state)."""
        topo_file = self.logs / "topology.yaml"
        topo_file.write_text(dumps_topology(self.topo), encoding="utf-8")
        out = self.logs / "controller"
        program = Path(self.program)
        if not program.is_absolute():
            program = PROJECT_ROOT / program
        argv = [self.python, "-m", "controller", "run", "--topology", str(topo_file),
                "--out", str(out), "--target", self.switch, "--program", str(program),
                "--interval", "0.5"]
        proc = self.spawn("controller", None, argv)
        state = out / "controller_state.json"
        deadline = time.monotonic() + self.ready_timeout_s
        last = "no state file yet"
        while time.monotonic() < deadline:
            if proc.proc.poll() is not None:
                raise RunError(f"controller exited with status {proc.proc.returncode} before "
                               f"programming the switches: {proc.tail()}")
            with contextlib.suppress(OSError, ValueError):
                sw = json.loads(state.read_text()).get("switches", [])
                pending = [s["name"] for s in sw if str(s.get("state", "")).lower()
                           not in READY_STATES]
                if sw and not pending:
                    return
                last = f"waiting for {', '.join(pending) or 'switch list'}"
            time.sleep(0.5)
        raise RunError(f"controller: switches not programmed after {self.ready_timeout_s:.0f} s "
                       f"({last}); log: {proc.tail()}")

    def _start_samplers(self) -> None:
        d = self.logs / "samples"
        d.mkdir(parents=True, exist_ok=True)
        nodes = []
        for sw in self.topo.switch_names:
            (d / f"{sw}.jsonl").unlink(missing_ok=True)
            nodes.append(f"{sw}={self.net.get(sw).pid}")
        self.spawn("sampler", None, [self.python, "-m", "mininet_topos.experiment.sampler",
                                     "--interval", f"{self.sample_interval_s:g}",
                                     "--out-dir", str(d), *nodes])

    # -- processes --------------------------------------------------------------
    def spawn(self, name: str, node: str | None, argv: list[str]) -> NodeProcess:
        """Start ``argv`` inside Mininet node ``node`` (None: beside Mininet), logging to
        ``logs/<name>.log``; the test bed stops it on exit."""
        log_path = self.logs / f"{name}.log"
        with open(log_path, "wb") as log:
            kw: dict[str, Any] = {"stdout": log, "stderr": subprocess.STDOUT,
                                  "cwd": str(PROJECT_ROOT), "env": _env()}
            if node is None:
                proc = subprocess.Popen(argv, start_new_session=True, **kw)
            else:
                proc = self.net.get(node).popen(argv, **kw)
        p = NodeProcess(name=name, node=node or "", proc=proc, log=log_path)
        self.processes.append(p)
        return p

    def samples_dir(self) -> Path:
        return self.logs / "samples"

    def stop_samplers(self) -> None:
        """Stop the samplers (each writes a last sample first)."""
        keep = []
        for p in self.processes:
            if p.name == "sampler":
                p.stop()
            else:
                keep.append(p)
        self.processes = keep

    def resources(self) -> dict[str, Any]:
        """What this test bed created outside its own process, for teardown checks:
        WAN namespaces, node shell PIDs, the socket folder."""
        ns = [link._ns.name for link in self.net.links if getattr(link, "_ns", None)]
        return {"wan_namespaces": ns, "node_pids": [n.pid for n in self.net.values()],
                "sock_dir": str(self.sock_dir) if self.sock_dir else None,
                "process_pids": [p.proc.pid for p in self.processes]}

    def wan_links(self) -> dict[str, Any]:
        """Topology link name -> the running :class:`~mininet_topos.wan.WanLink`."""
        out = {}
        for link in self.net.links:
            wan = getattr(link, "wan", None)
            if wan is None:
                continue
            a, b = link.intf1, link.intf2
            out[f"{a.node.name}:{a.node.ports[a]}-{b.node.name}:{b.node.ports[b]}"] = wan
        return out
