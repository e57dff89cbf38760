"""Per-node counter sampler: interface counters and queue backlogs as JSON lines.

Why: on the Linux-router stand-in there is no INT, so the experiment reads what the
kernel counts instead: each router port's packets and bytes (``/proc/net/dev``, which
as ``/proc/PID/net/dev`` of a process in the router's namespace) and its egress queue
(``tc -s -j qdisc`` run in that namespace: backlog packets/bytes, drops).  Per link,
packets sent by one end minus packets received by the other are exactly the packets
the wire lost, like the P4 program's link sequence counters.  One process reads every
node in the same instant (so the two ends of a link are compared at the same time)::

    python -m mininet_topos.testbed.sampler --interval 0.2 --out-dir DIR s1=PID1 s2=PID2

and writes ``DIR/<node>.jsonl``.

Each line: ``{"t_ns": wall clock, "dev": {ifname: [rx_pkts, tx_pkts, rx_bytes,
tx_bytes, rx_drop, tx_drop]}, "q": {ifname: [backlog_pkts, backlog_bytes, drops]}}``.
It stops on SIGTERM/SIGINT after writing one last sample.
"""
from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "read_proc_net_dev", "read_qdiscs", "sample"]


def read_proc_net_dev(text: str | None = None, *, pid: int | None = None
                      ) -> dict[str, list[int]]:
    """Interface -> [rx_pkts, tx_pkts, rx_bytes, tx_bytes, rx_drop, tx_drop] (lo left out)
    of the namespace of ``pid`` (default: this process)."""
    if text is None:
        text = Path(f"/proc/{pid}/net/dev" if pid else "/proc/net/dev").read_text()
    out: dict[str, list[int]] = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        f = rest.split()
        if name == "lo" or len(f) < 12:
            continue
        out[name] = [int(f[1]), int(f[9]), int(f[0]), int(f[8]), int(f[3]), int(f[11])]
    return out


def read_qdiscs(text: str | None = None, *, pid: int | None = None) -> dict[str, list[int]]:
    """Interface -> [backlog_pkts, backlog_bytes, drops] of its leaf queue (the deepest
    qdisc with a parent, else the root), in the namespace of ``pid`` (Mininet's
    ``mnexec -a``) or this process's."""
    if text is None:
        argv = ["tc", "-s", "-j", "qdisc", "show"]
        if pid:
            argv = ["mnexec", "-a", str(pid), *argv]
        text = subprocess.run(argv, capture_output=True, text=True, timeout=5,
                              check=False).stdout
    try:
        qdiscs: list[dict[str, Any]] = json.loads(text or "[]")
    except json.JSONDecodeError:
        return {}
    out: dict[str, list[int]] = {}
    for q in qdiscs:
        dev = q.get("dev")
        if not dev or dev == "lo" or q.get("kind") in ("noqueue", "clsact", "ingress"):
            continue
        vals = [int(q.get("qlen", 0)), int(q.get("backlog", 0)), int(q.get("drops", 0))]
        if dev not in out or q.get("parent", "root") != "root":
            out[dev] = vals
    return out


def sample(pid: int | None = None, t_ns: int | None = None) -> dict[str, Any]:
    """One record of the namespace of ``pid`` (counters first, queues after)."""
    t = time.time_ns() if t_ns is None else t_ns
    return {"t_ns": t, "dev": read_proc_net_dev(pid=pid), "q": read_qdiscs(pid=pid)}


def sample_all(pids: dict[str, int]) -> dict[str, dict[str, Any]]:
    """Counters of every node read back to back under one timestamp, then queues."""
    t = time.time_ns()
    recs = {}
    for node, pid in pids.items():
        try:
            recs[node] = {"t_ns": t, "dev": read_proc_net_dev(pid=pid), "q": {}}
        except OSError:  # the node is gone (teardown)
            continue
    for node, rec in recs.items():
        rec["q"] = read_qdiscs(pid=pids[node])
    return recs


def _node_pid(text: str) -> tuple[str, int]:
    name, sep, pid = text.partition("=")
    if not sep or not name or not pid.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NODE=PID")
    return name, int(pid)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_topos.testbed.sampler",
                                 description="Sample interface counters and queues.")
    ap.add_argument("--interval", type=float, default=0.2, help="seconds between samples")
    ap.add_argument("--out-dir", type=Path, required=True,
                    help="folder for <node>.jsonl (appended to)")
    ap.add_argument("nodes", nargs="+", type=_node_pid, metavar="NODE=PID",
                    help="node name and the PID of a process in its network namespace")
    args = ap.parse_args(argv)
    if not 0.01 <= args.interval <= 60:
        print(f"error: --interval {args.interval}: outside 0.01..60 s", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    pids = dict(args.nodes)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    files = {n: open(args.out_dir / f"{n}.jsonl", "a", encoding="utf-8")  # noqa: SIM115
             for n in pids}
    try:
        while True:
            last = stop.wait(args.interval)
            for node, rec in sample_all(pids).items():
                files[node].write(json.dumps(rec, separators=(",", ":")) + "\n")
                files[node].flush()
            if last:
                return 0
    finally:
        for fh in files.values():
            fh.close()


if __name__ == "__main__":
    sys.exit(main())
