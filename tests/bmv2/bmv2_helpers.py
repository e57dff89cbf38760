"""Real BMv2 for the `bmv2` tier: find the tools, start ``simple_switch_grpc`` inside a
network namespace (or, with its ports as pcap files, in the test's own) with its
P4Runtime server on a Unix socket (reachable from the test, which runs in the root
namespace), and stop it by PID."""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = [ROOT / "p4" / "int_rocev2.p4", *sorted((ROOT / "p4" / "examples").glob("*.p4"))]


def require_tools() -> None:
    """Skip, with the reason, where BMv2 or p4c is missing."""
    from controller.p4rt.p4c import find_p4c
    if shutil.which("simple_switch_grpc") is None:
        pytest.skip("needs BMv2 simple_switch_grpc on PATH (scripts/install_p4_tools.sh installs a "
                    "prebuilt one)")
    if find_p4c() is None:
        pytest.skip("needs p4c (p4c or p4c-bm2-ss) on PATH")


@dataclass
class Bmv2Process:
    """One ``simple_switch_grpc`` in namespace ``ns`` (a common.kernel.netns.Namespace;
    None: the caller's).  ``ports`` maps port numbers to interface names, or, with
    ``use_files``, to the path prefixes of their pcap files (``PREFIX_in.pcap`` read,
    ``PREFIX_out.pcap`` written, as ``simple_switch --use-files`` does)."""

    name: str
    ns: object | None
    device_id: int
    ports: dict[int, str]
    workdir: Path
    use_files: bool = False
    proc: subprocess.Popen | None = None

    @property
    def grpc_addr(self) -> str:
        return f"unix:{self.workdir / (self.name + '.grpc.sock')}"

    def start(self) -> None:
        from mininet_topos.switches import wait_for_grpc
        sock = self.workdir / f"{self.name}.grpc.sock"
        sock.unlink(missing_ok=True)
        log = self.workdir / f"{self.name}.log"
        argv = ["simple_switch_grpc", "--device-id", str(self.device_id), "--log-level", "warn",
                "--log-file", str(self.workdir / f"{self.name}.bmv2"),
                # the default notification socket is /tmp/bmv2-<device id>-...: one per switch
                "--notifications-addr", f"ipc://{self.workdir / (self.name + '.notify.ipc')}"]
        if self.use_files:
            argv += ["--use-files", "0"]     # read the inputs at once: the FIFOs pace them
        for port, ifname in sorted(self.ports.items()):
            argv += ["-i", f"{port}@{ifname}"]
        argv += ["--no-p4", "--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", "510"]
        with open(log, "ab") as out:
            if self.ns is None:
                self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
            else:
                self.proc = self.ns.popen(argv, stdout=out, stderr=subprocess.STDOUT)  # type: ignore[attr-defined]
        wait_for_grpc(self.grpc_addr, timeout_s=30, proc=self.proc, what=f"BMv2 {self.name}", log=log)

    def stop(self) -> None:
        from common.processes import stop_process
        proc, self.proc = self.proc, None
        stop_process(proc)
