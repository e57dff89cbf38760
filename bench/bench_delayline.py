"""The WAN delay lines side by side: the native one against the Python one, same path,
same run.

Why: a WAN experiment measures its endpoints only while the emulator keeps up.  The
Python line (``mininet_topos/delayline.py``) tops out near 100 Mbit/s on a small
machine; the native one (``mininet_topos/wan/native/delayline.c``) is meant to carry
Gbit/s.  Per line, on ``h1 -> [mid: line, 5 ms] -> h2`` (namespaces and veths of its
own):

* **unpaced**: ``tn_udp_blast`` sends ``--packets`` datagrams of 1,056 bytes (a RoCEv2
  data packet's UDP payload at 1 KiB MTU) as fast as ``sendmmsg`` allows; the rate the
  receiver counts is what the line forwards at most, and the line's CPU time per frame
  it forwarded (from ``/proc/PID/stat``) what each frame costs it.
* **paced**: ``--pps`` datagrams/s (``tn_udp_blast --pps``); the line's worst lateness
  against its own delivery times (``late_max_us``) and the share of frames delivered.

Prints one row per line and the ratios native / Python.  Root (namespaces)::

    make -C mininet_topos/wan/native
    flock /tmp/bench.lock python -m bench.bench_delayline [--packets 300000] [--pps 50000]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from mininet_topos.wan import WanLink
from mininet_topos.wan.delayline_link import native_line_built
from mininet_topos.wan.netns_path import WanPath

ROOT = Path(__file__).resolve().parents[1]
BLAST = ROOT / "traffic" / "native" / "bin" / "tn_udp_blast"
PAYLOAD = 1056
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def blast(p: WanPath, n: int, pps: int | None) -> dict[str, float]:
    """Send ``n`` datagrams h1 -> h2 (unpaced, or at ``pps``); what the receiver counted."""
    rx = p.h2.popen([str(BLAST), "--recv", "--local", p.ips[1]], stdout=subprocess.PIPE,
                    text=True)
    try:
        assert rx.stdout is not None
        if rx.stdout.readline().strip() != "ready":
            raise RuntimeError("tn_udp_blast --recv did not start")
        tx_cmd = [str(BLAST), "--send", "--local", p.ips[0], "--peer", p.ips[1],
                  "-s", str(PAYLOAD), "-n", str(n), *(["--pps", str(pps)] if pps else [])]
        p.h1.run(tx_cmd)
        out, _ = rx.communicate(timeout=120)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()
    # one line: packets, bytes, seconds (first to last received), payload bit/s
    m = re.search(r"^(\d+) (\d+) ([\d.]+) ([\d.]+)$", out, re.MULTILINE)
    if m is None:
        raise RuntimeError(f"tn_udp_blast --recv printed {out!r}")
    pkts, secs = int(m.group(1)), float(m.group(3))
    return {"pkts": pkts, "pps": pkts / secs if secs > 0 else 0.0}


def measure(p: WanPath, line: str, n: int, pps: int) -> dict[str, float]:
    """Both phases on ``line``, each on a fresh line (its lateness is a maximum)."""
    def link() -> WanLink:
        return WanLink(p.m1.ifname, p.m2.ifname, netns=p.mid.name, delay_ms=5.0, line=line)

    with link() as wan:
        assert wan.pid is not None
        c0 = cpu_s(wan.pid)
        unpaced = blast(p, n, None)
        c1 = cpu_s(wan.pid)
        fwd = wan.stats()["ab"]["tx_pkts"]
    n_paced = pps * 3
    with link() as wan:
        paced = blast(p, n_paced, pps)
        late = wan.stats()["ab"]["late_max_us"]
    return {"fwd_pps": unpaced["pps"], "cpu_us": (c1 - c0) * 1e6 / max(1, fwd),
            "fwd_gbps": unpaced["pps"] * (PAYLOAD + 42) * 8 / 1e9,
            "unpaced_share": unpaced["pkts"] / n,
            "paced_share": paced["pkts"] / n_paced, "late_max_us": late}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.bench_delayline",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--packets", type=int, default=300_000, help="unpaced datagrams per line")
    ap.add_argument("--pps", type=int, default=50_000, help="paced rate (3 s of it)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("bench_delayline: needs root (network namespaces)", file=sys.stderr)
        return 2
    if not native_line_built() or not BLAST.exists():
        print("bench_delayline: build first: make -C mininet_topos/wan/native && "
              "make -C traffic/native", file=sys.stderr)
        return 2
    p = WanPath("bd")
    try:
        rows = {line: measure(p, line, args.packets, args.pps) for line in ("python", "native")}
    finally:
        p.close()
    print(f"{args.packets} unpaced datagrams of {PAYLOAD} B, then {args.pps} pkt/s for 3 s, "
          "through h1 -> [line, 5 ms] -> h2\n")
    print("| line | unpaced: forwarded pkt/s | Gbit/s on the wire | delivered | "
          f"line CPU us/frame | paced {args.pps} pkt/s: delivered | late max us |")
    print("|---|---|---|---|---|---|---|")
    for line, r in rows.items():
        print(f"| {line} | {r['fwd_pps']:.0f} | {r['fwd_gbps']:.2f} | {r['unpaced_share']:.1%} "
              f"| {r['cpu_us']:.2f} | {r['paced_share']:.1%} | {r['late_max_us']:.0f} |")
    py, na = rows["python"], rows["native"]
    print(f"\nnative / python: forwarded rate {na['fwd_pps'] / max(1.0, py['fwd_pps']):.1f}x, "
          f"CPU per frame {na['cpu_us'] / max(1e-9, py['cpu_us']):.2f}x, paced delivery "
          f"{na['paced_share'] / max(1e-9, py['paced_share']):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
