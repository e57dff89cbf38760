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
* ``softswitch`` / ``ebpf`` / ``bmv2``: the P4 switch classes of
  :mod:`mininet_topos.switches` (``ebpf``: :mod:`mininet_topos.ebpf_switch`, softswitch's
  eBPF target, the program in the kernel on every port; the controller sees the same
  P4Runtime server and sends the same P4 source as to ``softswitch``)
  running ``p4/int_rocev2.p4`` on P4Runtime ports chosen free for this run,
  programmed by ``python -m controller run`` (beside Mininet; for BMv2 the program is
  compiled once with p4c, cached by content, the switches start with ``--no-p4`` and
  the controller pushes the compiled pipeline); the test bed waits
  until the controller's state file shows every switch ready and every host reaches
  every other.  Agent hosts get a /30 management veth to the root namespace and run
  ``python -m ebpf.agent`` (INT sink, records to the controller, rate/FEC feedback to
  the host's traffic control socket).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Self

from common.kernel.shaping import ShapingError, shaping_commands
from common.processes import ServerStartError, stop_process, wait_ready
from controller.topology import Topology, dumps_topology, port_queue_pkts, port_rates_mbps
from formats.int_md import HPCC_PORTS_INSTRUCTION_BITMAP
from mininet_topos.switches import P4SwitchError
from mininet_topos.wan import WanError

from .auth_keys import run_key_file, with_mutual_tls
from .errors import RunError

__all__ = ["PROJECT_ROOT", "NodeProcess", "Testbed"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent.parent
READY_STATES = ("ready", "synced", "programmed", "running")


_HANDED_OUT: set[int] = set()
_HANDED_OUT_LOCK = threading.Lock()


def free_port() -> int:
    """A TCP/UDP port nobody on 127.0.0.1 uses right now (the kernel's choice), and one
    this process has not handed out before: the kernel may give a port it just freed
    again at once, and two switches of one topology got the same P4Runtime port so."""
    for _ in range(1000):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            t.bind(("127.0.0.1", 0))
            port = t.getsockname()[1]
            try:
                u.bind(("127.0.0.1", port))
            except OSError:
                continue
        with _HANDED_OUT_LOCK:
            if port not in _HANDED_OUT:
                _HANDED_OUT.add(port)
                return port
    raise OSError("no free local port found in 1000 tries")


def with_free_ports(topo: Topology) -> Topology:
    """``topo`` with every switch's P4Runtime address moved to a free local port, so a
    run never meets another run's switches on the standard ports."""
    import dataclasses

    switches = tuple(dataclasses.replace(sw, grpc_addr=f"127.0.0.1:{free_port()}")
                     for sw in topo.switches)
    return dataclasses.replace(topo, switches=switches)


@dataclass(slots=True, kw_only=True)
class NodeProcess:
    """A process the test bed started inside a node (or beside Mininet)."""

    name: str
    node: str
    proc: subprocess.Popen
    log: Path

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout_s``; returns the exit status."""
        return stop_process(self.proc, grace_s=timeout_s)

    def tail(self, n_chars: int = 1500) -> str:
        try:
            return self.log.read_text(errors="replace")[-n_chars:]
        except OSError:
            return ""


def _agent_attached(p: NodeProcess) -> bool:
    """The host agent logged its first record line: its programs are attached."""
    return "rec " in p.tail(4000)


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
    ports: dict[str, int] = field(default_factory=dict)
    agent_hosts: tuple[str, ...] = ()
    feedback: bool = True     # agents relay the controller's rate/FEC feedback
    rate_feedback: bool = True   # False: the controller sends no rates (--no-rate-feedback)
    echo: bool = False        # agents echo INT in their host's ACKs (HPCC at the sender)
    fec_target: float = 0.0   # > 0: the controller chooses FEC per flow (--fec-target)
    ecn: str | None = None    # the controller's --ecn KMIN:KMAX:PMAX (None: its default)
    influx_url: str | None = None   # the controller exports live to this InfluxDB
    mitigate: str = "off"     # the controller's --mitigate off|advise|act (controller.mitigate)
    mitigate_hold_down_s: float | None = None   # its --mitigate-hold-down (None: its default)
    controller_interval_s: float | None = None  # its --interval, the link poll period (None: its default)
    controller_args: tuple[str, ...] = ()   # more of its options (e.g. --coll-log, --mitigate-job)
    web: str | None = None          # HOST:PORT: the controller serves the live view there
    web_url: str | None = None      # ... at this address (with its token beyond loopback)
    influx_database: str = "int_telemetry"
    auth: bool = True         # per-run key file for agents and controller (formats.auth)
    key_file: Path | None = None
    mtls: bool = False        # P4Runtime over mutual TLS (a CA and certificates per run)
    controller_cert: Any = None
    mgmt_ifnames: list[str] = field(default_factory=list)
    mgmt: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # host -> (root ip, host ip, fb port)
    _bmv2_files: tuple[Path, Path] | None = None   # p4c's (JSON, P4Info) for bmv2 switches
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack)

    # -- lifetime ---------------------------------------------------------------
    def __enter__(self) -> Self:
        from mininet_topos.topologies import mininet_network

        self.logs.mkdir(parents=True, exist_ok=True)
        if self.switch != "linux-router":
            self.topo = with_free_ports(self.topo)
        self.sock_dir = Path(tempfile.mkdtemp(prefix="tmx"))   # mode 0700
        try:
            if self.auth:
                self.key_file = run_key_file(self.sock_dir, self.topo, self.agent_hosts)
            if self.mtls and self.switch != "linux-router":
                self.topo, self.controller_cert = with_mutual_tls(self.topo, self.sock_dir)
            switch_cls = self._switch_class()
            try:
                self.net = self._stack.enter_context(
                    mininet_network(self.topo, switch=switch_cls, wan_seed=self.seed))
            except (P4SwitchError, WanError) as exc:
                raise RunError(f"starting {self.topo.name} with {self.switch} switches: "
                               f"{exc}") from exc
            self._stack.callback(self._stop_processes)
            if self.switch == "linux-router":
                self._shape_routers()
            else:
                self._add_management()
                self._start_controller()
                if self.agent_hosts:
                    self._start_agents()
                self._wait_forwarding()
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
            if self.sock_dir is not None:   # sockets, the run's key file and certificates
                shutil.rmtree(self.sock_dir, ignore_errors=True)
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
        if self.switch in ("softswitch", "ebpf"):
            from mininet_topos.ebpf_switch import EbpfSoftSwitch
            # statistics (per-port queue depth, drops) rewritten every sample interval
            return partial(EbpfSoftSwitch if self.switch == "ebpf" else SoftSwitch,
                           p4_program=str(program),
                           log_dir=str(self.logs / "switches"),
                           stats_interval_s=self.sample_interval_s)
        # BMv2 starts without a program; the controller pushes the compiled pipeline
        self._compile_bmv2(program)
        return partial(Bmv2Switch, no_p4=True, log_dir=str(self.logs / "switches"))

    def _compile_bmv2(self, program: Path) -> tuple[Path, Path]:
        """p4c's JSON and P4Info of ``program``, compiled once per content (cached)."""
        if self._bmv2_files is None:
            from controller.p4rt import PipelineError
            from controller.p4rt.p4c import compile_bmv2_cached
            try:
                self._bmv2_files = compile_bmv2_cached(program)
            except PipelineError as exc:
                raise RunError(f"starting {self.topo.name} with bmv2 switches: {exc}") from None
        return self._bmv2_files

    def _shape_routers(self) -> None:
        rates, depths = port_rates_mbps(self.topo), port_queue_pkts(self.topo)
        for sw in self.topo.switch_names:
            node = self.net.get(sw)
            for port, rate in sorted(rates[sw].items()):
                if rate <= 0:
                    continue
                try:
                    cmds = shaping_commands(f"{sw}-eth{port}", rate, int(depths[sw][port]))
                except ShapingError as exc:
                    raise RunError(f"switch {sw}: {exc}") from None
                for cmd in cmds:
                    out = node.cmd(cmd + " 2>&1; echo rc=$?").strip()
                    if not out.endswith("rc=0"):
                        raise RunError(f"switch {sw}: {cmd!r} failed: {out}")

    def _add_management(self) -> None:
        """A /30 veth from every agent host to the root namespace, so host agents reach
        the controller (which runs beside Mininet) and its feedback reaches them.
        Deleting the host's namespace deletes the pair."""
        import random

        net_byte = random.Random().randrange(16, 240)
        tag = f"{random.Random().randrange(16 ** 4):04x}"
        for i, h in enumerate(self.agent_hosts):
            node = self.net.get(h)
            root_if, host_if = f"tmxm{tag}{i}", "mgmt0"
            root_ip, host_ip = f"10.254.{net_byte}.{4 * i + 1}", f"10.254.{net_byte}.{4 * i + 2}"
            for cmd in (["ip", "link", "add", root_if, "type", "veth", "peer", "name", host_if,
                         "netns", str(node.pid)],
                        ["ip", "addr", "add", f"{root_ip}/30", "dev", root_if],
                        ["ip", "link", "set", root_if, "up"]):
                r = subprocess.run(cmd, capture_output=True, text=True, check=False)
                if r.returncode:
                    raise RunError(f"management link of {h}: {' '.join(cmd)}: {r.stderr.strip()}")
            self._stack.callback(subprocess.run, ["ip", "link", "del", root_if],
                                 capture_output=True, check=False)
            out = node.cmd(f"ip addr add {host_ip}/30 dev {host_if} && ip link set {host_if} up"
                           " 2>&1; echo rc=$?").strip()
            if not out.endswith("rc=0"):
                raise RunError(f"management link of {h}: {out}")
            self.mgmt[h] = (root_ip, host_ip, free_port())
            self.mgmt_ifnames.append(root_if)

    def _start_agents(self) -> None:
        """``python -m ebpf.agent`` in every agent host: INT sink on its interface,
        records to the controller, feedback relayed to the host's traffic socket."""
        assert self.sock_dir is not None
        procs = []
        for h in self.agent_hosts:
            root_ip, _, fb = self.mgmt[h]
            host = self.topo.host(h)
            procs.append(self.spawn(f"agent-{h}", h, [
                self.python, "-m", "ebpf.agent", "--iface", host.intf_name,
                "--controller", f"{root_ip}:{self.ports['agent']}", "--agent-id", host.ipv4,
                *(["--feedback-port", str(fb)] if self.feedback else []),
                *(["--echo"] if self.echo else []),
                "--control", str(self.sock_dir / f"{h}.sock"),
                *(["--key-file", str(self.key_file)] if self.key_file else []), "1"]))
        deadline = time.monotonic() + self.ready_timeout_s
        for p in procs:  # one deadline for all: each waits for what is left of it
            try:
                wait_ready(p.proc, partial(_agent_attached, p),
                           timeout_s=max(0.0, deadline - time.monotonic()), poll_s=0.3,
                           what=f"agent on {p.node}", detail=p.tail)
            except ServerStartError as exc:
                if p.proc.poll() is not None:  # "agent on X exited with status N: log"
                    raise RunError(str(exc)) from None
                raise RunError(f"agent on {p.node}: not attached after "
                               f"{self.ready_timeout_s:.0f} s: {p.tail()}") from None

    def _wait_forwarding(self, timeout_s: float = 30.0) -> None:
        """Ping from the first host to every other until all answer: the controller's
        state says "ready" when its writes are acknowledged, a moment before the last
        entries forward."""
        hosts = self.topo.host_names
        src = self.net.get(hosts[0])
        deadline = time.monotonic() + timeout_s
        for dst in hosts[1:]:
            ip = self.topo.host(dst).ipv4
            while "1 received" not in src.cmd(f"ping -c 1 -W 1 {ip}"):
                if time.monotonic() > deadline:
                    raise RunError(f"switches programmed but {hosts[0]} cannot reach {dst} "
                                   f"({ip}) after {timeout_s:.0f} s")

    def _start_controller(self) -> None:
        """``python -m controller run`` beside Mininet; wait until every switch is
        programmed (its state file names each switch with a ready state)."""
        topo_file = self.logs / "topology.yaml"
        topo_file.write_text(dumps_topology(self.topo), encoding="utf-8")
        out = self.logs / "controller"
        program = Path(self.program)
        if not program.is_absolute():
            program = PROJECT_ROOT / program
        self.ports = {"report": free_port(), "agent": free_port()}
        argv = [self.python, "-m", "controller", "run", "--topology", str(topo_file),
                *(["--key-file", str(self.key_file)] if self.key_file else []),
                *(["--grpc-cert", str(self.controller_cert.cert), "--grpc-key",
                   str(self.controller_cert.key)] if self.controller_cert else []),
                # the eBPF target takes what softswitch takes: P4 source as device config
                "--out", str(out), "--target", "bmv2" if self.switch == "bmv2" else "softswitch",
                "--program", str(program),
                "--interval", "0.5", "--listen", "0.0.0.0" if self.mgmt else "127.0.0.1",
                "--report-port", str(self.ports["report"]),
                "--agent-port", str(self.ports["agent"]),
                # HPCC profile plus the port field (bit 1): without it the controller
                # cannot tell two egress ports of one switch apart, and its per-hop
                # table (show hops, queue series) mixes them.
                "--int-instructions", f"{HPCC_PORTS_INSTRUCTION_BITMAP:#06x}"]
        if self.switch == "bmv2":
            js, info = self._compile_bmv2(program)
            argv += ["--bmv2-json", str(js), "--p4info", str(info)]
        if self.fec_target > 0:
            argv += ["--fec-target", f"{self.fec_target:g}"]
        if self.ecn is not None:
            argv += ["--ecn", self.ecn]
        if self.influx_url:
            argv += ["--influx", self.influx_url, "--database", self.influx_database]
        if self.mitigate != "off":
            argv += ["--mitigate", self.mitigate]
            if self.mitigate_hold_down_s is not None:
                argv += ["--mitigate-hold-down", f"{self.mitigate_hold_down_s:g}"]
        if self.controller_interval_s is not None:
            argv += ["--interval", f"{self.controller_interval_s:g}"]
        if not self.rate_feedback:
            argv += ["--no-rate-feedback"]
        argv += list(self.controller_args)
        if self.web:
            from controller.web import parse_web_address
            from controller.web.server import check_web_exposure
            host, port = parse_web_address(self.web)
            token = check_web_exposure(host, None)
            argv += ["--web", f"{host}:{port}"] + (["--web-token", token] if token else [])
            shown = f"[{host}]" if ":" in host else host
            self.web_url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
        for h, (_, host_ip, fb) in sorted(self.mgmt.items()):
            argv += ["--agent", f"{h}={host_ip}:{fb}"] if self.feedback else []
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
        self.spawn("sampler", None, [self.python, "-m", "mininet_topos.testbed.sampler",
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

    def add_cleanup(self, fn: Any) -> None:
        """Call ``fn`` when the test bed closes, before the network goes (errors ignored)."""
        def safe() -> None:
            with contextlib.suppress(Exception):
                fn()
        self._stack.callback(safe)

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
                "root_ifnames": list(self.mgmt_ifnames),
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
