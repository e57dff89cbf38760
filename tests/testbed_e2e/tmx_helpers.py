"""Helpers of the end-to-end test bed tests: what a run must leave behind (nothing)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path


def alive(pid: int) -> bool:
    """True if ``pid`` runs and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def leftovers(resources: dict, *markers: str) -> list[str]:
    """Everything of a finished run that still exists: WAN namespaces, node shells,
    processes (by PID, or naming ``marker`` on their command line), the socket folder,
    switch interfaces in the root namespace."""
    out = []
    names = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                               check=False).stdout.split())
    out += [f"namespace {n}" for n in resources.get("wan_namespaces", []) if n in names]
    out += [f"pid {p}" for p in resources.get("node_pids", []) + resources.get("process_pids", [])
            if alive(p)]
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=False).stdout
    out += [f"interface {n}" for n in resources.get("root_ifnames", []) if f" {n}@" in links
            or f" {n}:" in links]
    if resources.get("sock_dir") and os.path.exists(resources["sock_dir"]):
        out.append(f"folder {resources['sock_dir']}")
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if any(m in cmd for m in markers) and "pytest" not in cmd:
            out.append(f"process {pid}: {cmd[:120]}")
    return out
