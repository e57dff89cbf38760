"""Shared by the eBPF-target tests: the project's STF tests and which of them the
eBPF target runs today (the others must be refused with a location), and a switch
process started in a namespace."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "p4"

# every STF test of the project: (program, test)
ALL_STF = sorted([(p.with_suffix(".p4"), p) for p in (ROOT / "p4" / "examples").glob("*.stf")]
                 + [(p.with_suffix(".p4"), p) for p in (ROOT / "tests" / "conformance").glob("*.stf")])

# the ones the eBPF target runs; the rest need constructs it refuses (README: what is
# supported); a construct that starts to work moves its program here
RUNS_ON_EBPF = {"ipv4_forward", "ecn_marking", "firewall", "ecmp", "calc", "source_routing", "mirror", "multicast",
                "route_inspection", "h2_stack"}


def start_switch_process(ns: Any, args: Sequence[str], ready: Path, *,
                         timeout_s: float = 60.0) -> subprocess.Popen:
    """``python -m softswitch switch ARGS`` inside namespace ``ns`` (ended with it),
    returned once ``ready`` (its stats file or P4Runtime socket) exists; the test fails
    with the switch's stderr if it exits first."""
    proc = ns.popen([sys.executable, "-m", "softswitch", "switch", *args], cwd=str(ROOT),
                    env=dict(os.environ, PYTHONPATH=str(ROOT)), stderr=subprocess.PIPE,
                    text=True)
    deadline = time.monotonic() + timeout_s
    while not ready.exists():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"ebpf switch not ready in {timeout_s:.0f} s"
        time.sleep(0.05)
    return proc
