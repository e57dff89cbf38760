"""Namespace topologies and process launching shared by the traffic tests (prefix "ttr")."""
from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from common.kernel.netns import Namespace, veth_pair
from traffic import startgate

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


@contextlib.contextmanager
def softswitch_star(n: int, tmp: Path, *, prefix: str, subnet: str, program: Path,
                    entries: Callable[[list[Namespace]], str], neigh_mac: str | None,
                    queue_rate_mbps: int, queue_depth_pkts: int,
                    ready_timeout_s: float) -> Iterator[tuple[list[Namespace], Path]]:
    """``n`` hosts ``{subnet}.1..n`` on one softswitch running ``program`` with the
    ``entries(hosts)`` it is given (host i on port i + 1); port 1 paced at
    ``queue_rate_mbps`` with a ``queue_depth_pkts`` queue.  Hosts reach each other by
    static neighbours: ``neigh_mac`` (the switch's, where the program rewrites MACs) or,
    when None, the other host's own MAC.  Yields the hosts once host 1 pings host 0
    (failing after ``ready_timeout_s`` or when the switch exits) and the switch's
    statistics file; the switch is stopped and the namespaces closed even on failure."""
    sw = Namespace.create(f"{prefix}sw")
    hosts: list[Namespace] = []
    proc = None
    try:
        ports = []
        for i in range(n):
            h = Namespace.create(f"{prefix}h")
            hosts.append(h)
            end_h, end_s = veth_pair(h, sw, prefix=prefix, addr_a=f"{subnet}.{i + 1}/24")
            h.ifname, h.ip, h.mac = end_h.ifname, end_h.ip or "", end_h.mac
            ports.append(end_s.ifname)
        for h in hosts:
            for o in hosts:
                if o is not h:
                    h.run(["ip", "neigh", "replace", o.ip, "lladdr", neigh_mac or o.mac,
                           "dev", h.ifname])
        entries_file = tmp / "switch.entries"
        entries_file.write_text(entries(hosts))
        stats = tmp / "switch.stats.json"
        argv = [PY, "-m", "softswitch", "switch", str(program), "--grpc-server-addr", "none",
                "--entries", str(entries_file), "--queue-rate", f"1:{queue_rate_mbps}",
                "--queue-depth", str(queue_depth_pkts), "--stats-file", str(stats),
                "--stats-interval", "1"]
        for i, ifname in enumerate(ports):
            argv += ["-i", f"{i + 1}@{ifname}"]
        log = tmp / "switch.log"
        with open(log, "w") as fh:  # a file, not a pipe nobody reads while it runs
            proc = sw.popen(argv, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + ready_timeout_s
        while hosts[1].run(["ping", "-c", "1", "-W", "1", hosts[0].ip],
                           check=False).returncode != 0:
            assert proc.poll() is None, log.read_text()[-2000:]
            assert time.monotonic() < deadline, \
                f"softswitch does not forward after {ready_timeout_s:g} s"
        yield hosts, stats
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
        for h in hosts:
            h.close()
        sw.close()


def port_stats(stats: Path, port: int) -> dict:
    """One port's entry in the softswitch's statistics file."""
    ports = json.loads(stats.read_text())["ports"]
    return next(p for p in ports if int(p["port"]) == port)


def run_ranks(hosts: list[Namespace], pattern: str, args: list[str], out_dir: Path, *,
              per_rank: dict[int, list[str]] | None = None, timeout: float = 60.0) -> list[dict]:
    """Run one ``python -m traffic`` process per namespace; return their JSON summaries."""
    addrs = ",".join(h.ip for h in hosts)
    start = out_dir / "start"   # the ranks start together once all are bound
    procs = []
    for r, h in enumerate(hosts):
        extra = (per_rank or {}).get(r, [])
        cmd = [PY, "-m", "traffic", pattern, "--hosts", addrs, "--rank", str(r),
               "--start-file", str(start), "-o", str(out_dir / f"rank{r}.json"),
               "--timeout", f"{timeout}", *args, *extra]
        procs.append(h.popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             cwd=ROOT))
    startgate.start_together(start, len(procs), timeout_s=timeout,
                             alive=lambda: all(p.poll() is None for p in procs))
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


@contextlib.contextmanager
def ring_with_standby(ranks: list[Namespace], spare: Namespace, tmp: Path, args: list[str], *,
                      per_rank: dict[int, list[str]] | None = None
                      ) -> Iterator[tuple[list[str], str, list[subprocess.Popen]]]:
    """An all-reduce ring on ``ranks`` (each with a control socket) and a standby rank on
    ``spare`` (traffic.standby), started together; yields (the ranks' control sockets,
    the standby's, the processes: ranks then standby).  Processes left are killed."""
    addrs = ",".join(h.ip for h in ranks)
    start = tmp / "start"
    ctl = [str(tmp / f"ctl{r}") for r in range(len(ranks))]
    sctl = str(tmp / "ctl-spare")
    common = ["--hosts", addrs, *args]
    procs = []
    try:
        for r, h in enumerate(ranks):
            procs.append(h.popen(
                [PY, "-m", "traffic", "allreduce", *common, "--rank", str(r), "--control", ctl[r],
                 "--start-file", str(start), "-o", str(tmp / f"rank{r}.json"),
                 *(per_rank or {}).get(r, [])],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT))
        procs.append(spare.popen(
            [PY, "-m", "traffic", "allreduce", *common, "--standby", spare.ip, "--control", sctl,
             "-o", str(tmp / "spare.json")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT))
        end = time.monotonic() + 30
        while not (Path(sctl).exists() and all(Path(c).exists() for c in ctl)):
            assert all(p.poll() is None for p in procs), "a rank exited before binding"
            assert time.monotonic() < end, "the ranks did not open their control sockets"
            time.sleep(0.05)
        startgate.start_together(start, len(ranks), timeout_s=60,
                                 alive=lambda: all(p.poll() is None for p in procs))
        yield ctl, sctl, procs
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def finish(procs: list[subprocess.Popen], timeout: float) -> None:
    """Wait for every process; each must exit 0."""
    for p in procs:
        _out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, err[-3000:]
