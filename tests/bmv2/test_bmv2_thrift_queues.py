"""Bmv2Switch's Thrift path for queue rates and depths, against a BMv2 that serves
Thrift: ``simple_switch`` (builds of simple_switch_grpc may have no Thrift server, and
then Bmv2Switch shapes its ports in the kernel instead)."""
from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from bmv2_helpers import ROOT, require_tools

pytestmark = [pytest.mark.bmv2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_thrift(port: int, proc: subprocess.Popen, log: Path, timeout_s: float = 90) -> None:
    """A bound, not a speed check: a loaded CI machine once took over 30 s."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"simple_switch exited {proc.returncode}: {log.read_text()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"simple_switch served no Thrift on port {port} within {timeout_s:g} s")


def test_queue_rates_and_depths_over_thrift(tmp_path: Path) -> None:
    require_tools()
    if shutil.which("simple_switch") is None or shutil.which("simple_switch_CLI") is None:
        pytest.skip("needs BMv2 simple_switch and simple_switch_CLI (the Thrift server and client)")
    pytest.importorskip("thrift", reason="simple_switch_CLI needs Python's thrift (Debian: python3-thrift)")
    from common.processes import stop_process
    from controller.p4rt import compile_bmv2_cached
    from mininet_topos.switches import set_queues_over_thrift

    js, _ = compile_bmv2_cached(ROOT / "p4" / "examples" / "ipv4_forward.p4")
    port = _free_port()
    log = tmp_path / "simple_switch.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            ["simple_switch", "--device-id", "7", "--thrift-port", str(port), "--log-level", "warn",
             "--notifications-addr", f"ipc://{tmp_path / 'notify.ipc'}", str(js)],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for_thrift(port, proc, log)
        why, cmds = set_queues_over_thrift(port, {1: 120.0, 2: 0.0}, {1: 64, 2: 32})
        assert why is None, why
        # 120 Mbit/s in 1500-byte packets; a zero rate is left alone
        assert cmds == ["set_queue_rate 10000 1", "set_queue_depth 64 1", "set_queue_depth 32 2"]
    finally:
        stop_process(proc)
    why, _ = set_queues_over_thrift(port, {1: 120.0}, {})
    assert why is not None and why.startswith("simple_switch_CLI"), why
