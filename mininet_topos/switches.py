"""Mininet switch classes for P4 targets: softswitch and BMv2 simple_switch_grpc
(softswitch's eBPF target: :mod:`mininet_topos.ebpf_switch`).

Both take the options :func:`mininet_topos.topologies.switch_options` hands a switch
(``device_id``, ``grpc_addr``/``grpc_port``, ``cpu_port``, ``queue_rates_mbps``,
``queue_depths_pkts``) plus ``p4_program``, ``pcap_dir``, ``log_dir``/``log_console``,
and wait in ``start`` until the P4Runtime server answers (:func:`wait_for_grpc`).

Where things live: a :class:`SoftSwitch` node is its own network namespace (its
``sN-ethM`` interfaces are there, nothing is added to the root namespace); the switch
process runs in the namespace Mininet runs in and opens its ports inside the node
(``--netns /proc/PID/ns/net``), so its P4Runtime server on 127.0.0.1 is reachable by a
controller running beside Mininet. BMv2 cannot split itself that way, so a
:class:`Bmv2Switch` runs as Mininet runs switches by default (interfaces in the root
namespace, no addresses or routes set there).

    net = Mininet(topo=mininet_topo(topo), switch=SoftSwitch, controller=None, ...)
"""
from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common.kernel.shaping import ShapingError, shaping_commands
from common.processes import log_tail, stop_process
from controller.topology.model import DEFAULT_CPU_PORT, DROP_PORT

__all__ = ["Bmv2Switch", "P4SwitchError", "SoftSwitch", "bmv2_tls_args", "set_queues_over_thrift",
           "wait_for_grpc"]

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class P4SwitchError(RuntimeError):
    """A P4 switch node could not be configured or started; the message names the switch."""


def _answers(address: str, tls: bool) -> str | None:
    """None when a P4Runtime server answers on `address`, else why not."""
    if tls:   # it wants a client certificate: an accepted TCP connection counts
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=1.0).close()
            return None
        except OSError as exc:
            return str(exc)
    import grpc
    from p4.v1 import p4runtime_pb2 as P
    from p4.v1 import p4runtime_pb2_grpc as PG
    with grpc.insecure_channel(address) as ch:
        try:
            PG.P4RuntimeStub(ch).Capabilities(P.CapabilitiesRequest(), timeout=1.0)
            return None
        except grpc.RpcError as exc:
            code = exc.code()
            if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                return None  # it answered, if only to refuse
            return f"{code.name}: {exc.details()}"


def wait_for_grpc(address: str, *, timeout_s: float = 60.0, proc: subprocess.Popen | None = None,
                  what: str = "switch", log: Path | None = None, tls: bool = False) -> None:
    """Block until a P4Runtime server answers on `address` (any reply but UNAVAILABLE counts).

    With `proc`, fail as soon as the process exits, quoting the end of `log`.  With `tls`
    (a server that wants client certificates) an accepted TCP connection counts.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.poll() is not None:
            tail = log_tail(log)
            raise P4SwitchError(f"{what}: exited with status {proc.returncode} before its P4Runtime "
                                f"server answered on {address}{': ' + tail if tail else ''}")
        last = _answers(address, tls)
        if last is None:
            return
        if time.monotonic() > deadline:
            raise P4SwitchError(f"{what}: no P4Runtime server on {address} after {timeout_s:.0f} s "
                                f"({last})")
        time.sleep(0.2)


def _switch_base() -> type:
    try:
        from mininet.node import Switch
    except ImportError:  # the helpers above work without Mininet
        return object
    return Switch


class _P4Switch(_switch_base()):  # type: ignore[misc]
    """What both targets share: options, ports, process lifetime, readiness."""

    target = "p4 switch"

    def __init__(self, name: str, *, p4_program: str | Path | None = None, device_id: int = 0,
                 grpc_addr: str | None = None, grpc_port: int | None = None, cpu_port: int = DEFAULT_CPU_PORT,
                 pcap_dir: str | Path | None = None, log_dir: str | Path | None = None,
                 log_console: bool = False, queue_rates_mbps: dict[int, float] | None = None,
                 queue_depths_pkts: dict[int, int] | None = None, node_id: int | None = None,
                 startup_timeout_s: float = 60.0, tls: Any = None, **params: Any) -> None:
        if grpc_addr is None:
            if grpc_port is None:
                raise P4SwitchError(f"{name}: give grpc_addr or grpc_port")
            grpc_addr = f"127.0.0.1:{grpc_port}"
        if not 0 < cpu_port < DROP_PORT:
            raise P4SwitchError(f"{name}: cpu_port {cpu_port} outside 1..{DROP_PORT - 1}")
        for port, rate in (queue_rates_mbps or {}).items():
            if not 0 <= rate <= 1e6:
                raise P4SwitchError(f"{name}: queue rate of port {port}: {rate} Mbit/s outside 0..1e6")
        for port, depth in (queue_depths_pkts or {}).items():
            if not 1 <= depth < 1 << 19:
                raise P4SwitchError(f"{name}: queue depth of port {port}: {depth} packets outside 1..524287")
        self.p4_program = Path(p4_program) if p4_program else None
        self.device_id = device_id
        self.grpc_addr = grpc_addr
        self.cpu_port = cpu_port
        self.pcap_dir = Path(pcap_dir) if pcap_dir else None
        # a fresh directory by default: parallel networks reuse switch names (s1, s2, ...)
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"p4switch-{name}-"))
        self.log_console = log_console
        self.queue_rates_mbps = dict(queue_rates_mbps or {})
        self.queue_depths_pkts = dict(queue_depths_pkts or {})
        self.node_id = node_id
        self.startup_timeout_s = startup_timeout_s
        self.tls = tls   # controller.topology.SwitchTls: serve P4Runtime over mutual TLS
        self.proc: subprocess.Popen | None = None
        self.log_file = self.log_dir / f"{name}.log"
        super().__init__(name, **params)

    def data_ports(self) -> dict[int, str]:
        """Port number -> interface name, loopback left out."""
        return {self.ports[i]: i.name for i in self.intfList() if i.name != "lo"}

    def argv(self) -> list[str]:
        raise NotImplementedError

    def start(self, controllers: Any) -> None:
        if self.pcap_dir:
            self.pcap_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for ifname in self.data_ports().values():
            self.cmd(f"ip link set dev {ifname} up")
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = self._spawn(self.argv(), log)
        finally:
            log.close()
        try:
            wait_for_grpc(self.grpc_addr, timeout_s=self.startup_timeout_s, proc=self.proc,
                          what=f"{self.target} {self.name}", log=self.log_file,
                          tls=self.tls is not None)
        except BaseException:
            self._end()
            raise

    def _spawn(self, argv: list[str], log: Any) -> subprocess.Popen:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(PROJECT_ROOT),
                                start_new_session=True)

    def _end(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, grace_s=10.0)

    def stop(self, deleteIntfs: bool = True) -> None:
        self._end()
        super().stop(deleteIntfs)


class SoftSwitch(_P4Switch):
    """softswitch (``python -m softswitch switch``) as a Mininet switch in its own namespace."""

    target = "softswitch"

    def __init__(self, name: str, *, python: str = sys.executable, stats_interval_s: float = 0.0,
                 **params: Any) -> None:
        params.pop("inNamespace", None)
        self.python = python
        self.stats_interval_s = stats_interval_s
        super().__init__(name, inNamespace=True, **params)

    def argv(self) -> list[str]:
        argv = [self.python, "-m", "softswitch", "switch"]
        if self.p4_program:
            argv.append(str(self.p4_program))
        argv += ["--device-id", str(self.device_id), "--grpc-server-addr", self.grpc_addr,
                 "--cpu-port", str(self.cpu_port), "--netns", f"/proc/{self.pid}/ns/net",
                 "--name", self.name, "--stats-file", str(self.log_dir / f"{self.name}.stats.json")]
        for port, ifname in sorted(self.data_ports().items()):
            argv += ["-i", f"{port}@{ifname}"]
        for port, rate in sorted(self.queue_rates_mbps.items()):
            argv += ["--queue-rate", f"{port}:{rate:g}"]
        for port, depth in sorted(self.queue_depths_pkts.items()):
            argv += ["--queue-depth", f"{port}:{depth}"]
        if self.pcap_dir:
            argv += ["--pcap", str(self.pcap_dir)]
        if self.stats_interval_s:
            argv += ["--stats-interval", f"{self.stats_interval_s:g}"]
        argv += ["--log-console"] if self.log_console else ["--log-file", str(self.log_file)]
        if self.tls is not None and self.tls.cert:
            argv += ["--grpc-server-ssl", "--grpc-server-cert", self.tls.cert,
                     "--grpc-server-key", self.tls.key, "--grpc-server-cacert", self.tls.ca]
        return argv

    def _spawn(self, argv: list[str], log: Any) -> subprocess.Popen:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PROJECT_ROOT), env.get("PYTHONPATH")]))
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=str(PROJECT_ROOT),
                                env=env, start_new_session=True)

    def stats(self) -> dict[str, Any]:
        """The statistics the running switch keeps (per-port rx/tx/drops, queue high-water)."""
        from softswitch.switchd.stats import read_stats
        return read_stats(self.log_dir / f"{self.name}.stats.json")


class Bmv2Switch(_P4Switch):
    """BMv2 ``simple_switch_grpc`` with the same options.

    ``p4_program`` is the p4c JSON, or a ``.p4`` file compiled here with p4c once per
    content (:func:`controller.p4rt.p4c.compile_bmv2_cached`); ``no_p4=True`` starts it
    without a program, for the controller to push the pipeline over P4Runtime.  Runs
    where Mininet runs switches by default (its ports in the root namespace).

    Queue rates and depths: through ``simple_switch_CLI`` (Thrift) where the switch has
    a Thrift server, in packets per second for 1500-byte frames (BMv2 paces packets,
    not bits); builds of simple_switch_grpc without Thrift (PI's P4Runtime offers no
    queue settings) get each port shaped by the kernel instead (HTB at the rate, a
    pfifo of the depth), so the queue forms behind BMv2 and INT's queue fields stay
    near 0.  ``queue_backend`` says which one applied ("bmv2", "tc" or "").
    """

    target = "simple_switch_grpc"
    binary = "simple_switch_grpc"

    def __init__(self, name: str, *, thrift_port: int | None = None, no_p4: bool = False,
                 log_level: str = "warn", **params: Any) -> None:
        if shutil.which(self.binary) is None:
            raise P4SwitchError(f"{name}: BMv2 {self.binary} is not installed; use SoftSwitch, "
                                "which takes the same options and runs P4 source")
        prog = params.get("p4_program")
        if no_p4:
            params["p4_program"] = None
        elif prog and not str(prog).endswith(".json"):
            from controller.p4rt.errors import PipelineError
            from controller.p4rt.p4c import compile_bmv2_cached
            try:
                params["p4_program"], _ = compile_bmv2_cached(prog)
            except PipelineError as exc:
                raise P4SwitchError(f"{name}: {exc}") from None
        self.thrift_port = thrift_port if thrift_port is not None else _free_tcp_port()
        self.log_level = log_level
        self.queue_backend = ""
        params.setdefault("inNamespace", False)
        super().__init__(name, **params)

    def argv(self) -> list[str]:
        argv = [self.binary, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port),
                "--log-level", self.log_level,
                # the default, /tmp/bmv2-<device id>-notifications.ipc, is shared by every
                # switch of that device id on the machine
                "--notifications-addr", f"ipc://{self.log_dir / (self.name + '.notifications.ipc')}"]
        for port, ifname in sorted(self.data_ports().items()):
            argv += ["-i", f"{port}@{ifname}"]
        if self.pcap_dir:
            argv += ["--pcap", str(self.pcap_dir)]
        argv += ["--log-console"] if self.log_console else ["--log-file", str(self.log_dir / self.name)]
        argv.append(str(self.p4_program) if self.p4_program else "--no-p4")
        argv += ["--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", str(self.cpu_port)]
        return argv + bmv2_tls_args(self.tls)

    def start(self, controllers: Any) -> None:
        super().start(controllers)
        try:
            self._set_queues()
        except BaseException:
            self._end()
            raise

    def _set_queues(self) -> None:
        ports = sorted(set(self.queue_rates_mbps) | set(self.queue_depths_pkts))
        if not ports:
            return
        why, cmds = set_queues_over_thrift(self.thrift_port, self.queue_rates_mbps, self.queue_depths_pkts)
        if why is None:
            self.queue_backend = "bmv2"
            self._note(f"queue rates and depths set in BMv2: {'; '.join(cmds)}")
            return
        self._shape_ports(why)
        self._note(f"no Thrift queue settings ({why}): ports shaped by the kernel (tc HTB + pfifo)")

    def _note(self, line: str) -> None:
        """One line in the switch's log, where a user looks for what it runs with."""
        with contextlib.suppress(OSError), open(self.log_file, "a", encoding="utf-8") as f:
            f.write(f"[{self.name}] {line}\n")

    def _shape_ports(self, why: str) -> None:
        names = self.data_ports()
        for port in sorted(set(self.queue_rates_mbps) | set(self.queue_depths_pkts)):
            rate = self.queue_rates_mbps.get(port, 0.0)
            if port not in names or rate <= 0:
                continue
            try:
                cmds = shaping_commands(names[port], rate, self.queue_depths_pkts.get(port, 1000))
            except ShapingError as exc:
                raise P4SwitchError(f"{self.name}: no Thrift queue settings ({why}): {exc}") from None
            for cmd in cmds:
                out = self.cmd(cmd + " 2>&1; echo rc=$?").strip()
                if not out.endswith("rc=0"):
                    raise P4SwitchError(f"{self.name}: no Thrift queue settings ({why}) and "
                                        f"{cmd!r} failed: {out}")
        self.queue_backend = "tc"


def bmv2_tls_args(tls: Any) -> list[str]:
    """simple_switch_grpc's target options (behind ``--``) that serve P4Runtime over
    mutual TLS with ``tls`` (a ``controller.topology.SwitchTls`` with the switch's own
    certificate; none: plain gRPC): clients must show a certificate of the same CA."""
    if tls is None or not tls.cert:
        return []
    return ["--grpc-server-ssl", "--grpc-server-cacert", str(tls.ca),
            "--grpc-server-cert", str(tls.cert), "--grpc-server-key", str(tls.key),
            "--grpc-server-with-client-auth"]


def set_queues_over_thrift(thrift_port: int, rates_mbps: dict[int, float],
                           depths_pkts: dict[int, int]) -> tuple[str | None, list[str]]:
    """Set BMv2's per-port queue rates and depths with ``simple_switch_CLI`` over Thrift.

    Rates go in packets per second for 1500-byte frames (BMv2 paces packets, not bits).
    Returns (why it failed, or None; the CLI commands)."""
    cmds = [f"set_queue_rate {max(1, round(r * 1e6 / (1500 * 8)))} {p}"
            for p, r in sorted(rates_mbps.items()) if r]
    cmds += [f"set_queue_depth {d} {p}" for p, d in sorted(depths_pkts.items())]
    cli = shutil.which("simple_switch_CLI")
    if not cli:
        return "simple_switch_CLI is not on PATH", cmds
    # the CLI's own interpreter line may name a Python without Thrift; ours has it
    # where the Debian package python3-thrift is installed
    r = subprocess.run([sys.executable, cli, "--thrift-port", str(thrift_port)],
                       input="\n".join(cmds) + "\n", text=True, capture_output=True,
                       timeout=30, check=False)
    out = (r.stdout + r.stderr).strip()
    if r.returncode == 0 and "Error" not in out:
        return None, cmds
    return f"simple_switch_CLI: {out.splitlines()[-1] if out else f'exit {r.returncode}'}", cmds


def _free_tcp_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
