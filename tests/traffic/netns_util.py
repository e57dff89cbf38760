"""Namespace topologies and process launching shared by the traffic tests (prefix "ttr")."""
from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from mininet_topos.netns import Namespace, veth_pair

PY = sys.executable
ROOT = str(Path(__file__).resolve().parents[2])  # run ``python -m traffic`` from the checkout


@contextlib.contextmanager
def star(n: int, *, subnet_prefix: str = "10.78.0") -> Iterator[list[Namespace]]:
    """``n`` host namespaces joined by a Linux bridge in a switch namespace."""
    sw = Namespace.create("ttrsw")
    hosts: list[Namespace] = []
    try:
        with sw.iproute() as ipr:
            ipr.link("add", ifname="br0", kind="bridge")
            br = ipr.link_lookup(ifname="br0")[0]
            ipr.link("set", index=br, state="up")
        for i in range(n):
            h = Namespace.create("ttrh")
            hosts.append(h)
            end_h, end_s = veth_pair(h, sw, prefix="ttr", addr_a=f"{subnet_prefix}.{i + 1}/24")
            h.ifname, h.ip, h.mac = end_h.ifname, end_h.ip or "", end_h.mac
            with sw.iproute() as ipr:
                idx = ipr.link_lookup(ifname=end_s.ifname)[0]
                ipr.link("set", index=idx, master=br)
        yield hosts
    finally:
        for h in hosts:
            h.close()
        sw.close()


def run_ranks(hosts: list[Namespace], pattern: str, args: list[str], out_dir: Path, *,
              per_rank: dict[int, list[str]] | None = None, timeout: float = 60.0) -> list[dict]:
    """Run one ``python -m traffic`` process per namespace; return their JSON summaries."""
    addrs = ",".join(h.ip for h in hosts)
    start_at = time.time() + 1.5
    procs = []
    for r, h in enumerate(hosts):
        extra = (per_rank or {}).get(r, [])
        cmd = [PY, "-m", "traffic", pattern, "--hosts", addrs, "--rank", str(r),
               "--start-at", f"{start_at:.3f}", "-o", str(out_dir / f"rank{r}.json"),
               "--timeout", f"{timeout}", *args, *extra]
        procs.append(h.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT))
    outs = []
    for r, p in enumerate(procs):
        _out, err = p.communicate(timeout=timeout + 20)
        assert p.returncode == 0, f"rank {r} exited {p.returncode}: {err[-2000:]}"
        outs.append(json.loads((out_dir / f"rank{r}.json").read_text()))
    return outs


def udp_counters(ns: Namespace) -> dict[str, int]:
    """The namespace's kernel UDP counters (NoPorts: datagrams that found no socket)."""
    lines = [ln.split() for ln in ns.run(["cat", "/proc/net/snmp"]).stdout.splitlines()
             if ln.startswith("Udp:")]
    return {k: int(v) for k, v in zip(lines[0][1:], lines[1][1:])}
