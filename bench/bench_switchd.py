"""Forwarding rate and added latency through one softswitch process between two
namespaces, next to a Linux bridge on the same path (the baseline, same run), for the
Python target (`softswitch`) and the kernel target (`ebpf`, `--target ebpf`).

    h1 --veth-- [ middle namespace: Linux bridge | softswitch | ebpf ] --veth-- h2

* rate: h1 sends 64-byte UDP datagrams as fast as one Python process can for a few
  seconds; h2 counts what arrives; packets/s delivered for each middle box;
* latency: UDP ping-pong h1 -> h2 -> h1, one datagram in flight; round-trip median
  and p99 for each middle box, and the softswitch's added round trip (two passes);
* burst rate (`--burst`): several AF_PACKET senders in h1 write prebuilt frames as
  fast as they can (no UDP/IP stack on the sending side), and the frames delivered
  are read from h2's interface counter (no receiving socket to limit it), so the
  middle box, not the sender, is what is measured; a run against the bridge tells
  whether the senders could go faster (if bridge and ebpf tie, the sender is the limit);
* pacing: the softswitch with its h2 port paced (--queue-rate), h1 sending
  1000-byte datagrams as fast as it can; the frame bit rate that arrives, against
  the configured rate.

The softswitch runs p4/examples/ipv4_forward.p4 (LPM, MAC rewrite, TTL, checksum)
with its two routes given on the command line. Needs root (namespaces, raw sockets).

Examples:
  python -m bench.bench_switchd
  python -m bench.bench_switchd --seconds 5 --pings 2000
  python -m bench.bench_switchd --targets ebpf --burst 2
"""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from mininet_topos.netns import Namespace, veth_pair

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"
PREFIX = "tsdb"
BLAST = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dst, end, n = (sys.argv[1], 4444), time.monotonic() + float(sys.argv[2]), 0
msg = b"x" * int(sys.argv[3])
while time.monotonic() < end:
    for _ in range(64):
        try:
            s.sendto(msg, dst); n += 1
        except OSError:
            pass
print(n)
"""
# AF_PACKET burst sender: argv = ifname, seconds, frame hex; prints frames sent
BURST = """
import socket, sys, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
s.bind((sys.argv[1], 0))
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 22)
frame, end, n = bytes.fromhex(sys.argv[3]), time.monotonic() + float(sys.argv[2]), 0
send = s.send
while time.monotonic() < end:
    for _ in range(256):
        try:
            send(frame); n += 1
        except OSError:
            pass
print(n)
"""


def _quiet(ns: Namespace) -> None:
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
    ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)


@contextlib.contextmanager
def path(kind: str, tmp: Path, *, rate_mbps: float = 0.0) -> Iterator[tuple[Namespace, Namespace]]:
    """Two hosts joined through a middle namespace holding a bridge or a softswitch."""
    made: list[Namespace] = []
    try:
        h1, mid, h2 = (Namespace.create(PREFIX) for _ in range(3))
        made += [h1, mid, h2]
        for ns in made:
            _quiet(ns)
        a, m1 = veth_pair(h1, mid, prefix=PREFIX, addr_a="10.9.0.1/24")
        m2, b = veth_pair(mid, h2, prefix=PREFIX, addr_b="10.9.0.2/24")
        h1.ifname, h1.ip, h1.mac = a.ifname, "10.9.0.1", a.mac
        h2.ifname, h2.ip, h2.mac = b.ifname, "10.9.0.2", b.mac
        h1.run(["ip", "neigh", "replace", h2.ip, "lladdr", h2.mac, "dev", h1.ifname])
        h2.run(["ip", "neigh", "replace", h1.ip, "lladdr", h1.mac, "dev", h2.ifname])
        if kind == "bridge":
            mid.run(["ip", "link", "add", "br0", "type", "bridge"])
            for ifname in (m1.ifname, m2.ifname):
                mid.run(["ip", "link", "set", ifname, "master", "br0"])
            mid.run(["ip", "link", "set", "br0", "up"])
        else:
            target = ["--target", "ebpf"] if kind == "ebpf" else []
            entries = tmp / "routes.entries"
            entries.write_text("".join(
                f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a09000{i}/32 "
                f"MyIngress.ipv4_forward(dstAddr:0x{mac.replace(':', '')}, port:{i})\n"
                for i, mac in ((1, h1.mac), (2, h2.mac))))
            stats = tmp / "stats.json"
            stats.unlink(missing_ok=True)         # its appearance means "ready"
            mid.popen([sys.executable, "-m", "softswitch", "switch", str(PROGRAM), "--entries",
                       str(entries), "-i", f"1@{m1.ifname}", "-i", f"2@{m2.ifname}",
                       "--grpc-server-addr", "none", "--stats-file", str(stats), *target,
                       *(["--queue-rate", f"2:{rate_mbps:g}"] if rate_mbps else [])],
                      cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
            deadline = time.monotonic() + 60
            while not stats.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("softswitch did not start within 60 s")
                time.sleep(0.05)
        yield h1, h2
    finally:
        for ns in reversed(made):
            ns.close()


def _rx_packets(ns: Namespace) -> int:
    res = ns.run(["cat", f"/sys/class/net/{ns.ifname}/statistics/rx_packets"])
    return int(res.stdout.strip())


def measure_burst(h1: Namespace, h2: Namespace, seconds: float, senders: int) -> tuple[float, float]:
    """(frames/s arriving at h2's interface, frames/s the senders wrote) with `senders`
    AF_PACKET senders in h1 sending 64-byte UDP frames to h2."""
    from scapy.layers import inet
    from scapy.layers.l2 import Ether
    frame = bytes(Ether(src=h1.mac, dst=h2.mac) / inet.IP(src=h1.ip, dst=h2.ip)
                  / inet.UDP(sport=1234, dport=4444) / (b"x" * 18))
    before = _rx_packets(h2)
    procs = [h1.popen([sys.executable, "-c", BURST, h1.ifname, str(seconds), frame.hex()],
                      stdout=subprocess.PIPE, text=True) for _ in range(senders)]
    sent = 0
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 30)
        sent += int(out.strip() or 0)
    time.sleep(0.3)
    return (_rx_packets(h2) - before) / seconds, sent / seconds


def _udp(ns: Namespace, port: int) -> socket.socket:
    with ns.enter():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    return s


def measure_rate(h1: Namespace, h2: Namespace, seconds: float, payload: int = 64
                 ) -> tuple[float, int, float]:
    """(delivered packets/s, packets sent, delivered frame bits/s while packets arrived)."""
    rx = _udp(h2, 4444)
    rx.settimeout(0.5)
    got = [0]
    stamps: list[int] = []
    stop = threading.Event()

    def count() -> None:
        while not stop.is_set():
            try:
                rx.recv(2048)
                got[0] += 1
                stamps.append(time.monotonic_ns())
            except TimeoutError:
                pass

    t = threading.Thread(target=count, daemon=True)
    t.start()
    res = h1.run([sys.executable, "-c", BLAST, h2.ip, str(seconds), str(payload)],
                 timeout=seconds + 30)
    time.sleep(0.5)
    stop.set()
    t.join()
    rx.close()
    frame_bits = (payload + 8 + 20 + 14) * 8
    span = (stamps[-1] - stamps[0]) / 1e9 if len(stamps) > 1 else 0.0
    bps = (len(stamps) - 1) * frame_bits / span if span else 0.0
    return got[0] / seconds, int(res.stdout.strip()), bps


def measure_rtt(h1: Namespace, h2: Namespace, pings: int) -> np.ndarray:
    """Round-trip times in µs of `pings` UDP ping-pongs (lost ones left out)."""
    echo = _udp(h2, 5555)
    echo.settimeout(0.5)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                data, src = echo.recvfrom(2048)
                echo.sendto(data, src)
            except TimeoutError:
                pass

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    cli = _udp(h1, 0)
    cli.settimeout(0.5)
    rtts = []
    for i in range(pings):
        msg = i.to_bytes(4, "big") + bytes(60)
        t0 = time.perf_counter_ns()
        cli.sendto(msg, (h2.ip, 5555))
        try:
            while cli.recv(2048)[:4] != msg[:4]:
                pass
        except TimeoutError:
            continue
        rtts.append((time.perf_counter_ns() - t0) / 1000)
    stop.set()
    t.join()
    cli.close()
    echo.close()
    return np.asarray(rtts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0, help="length of each rate run (default 3)")
    ap.add_argument("--pings", type=int, default=1000, help="ping-pongs per latency run (default 1000)")
    ap.add_argument("--rate-mbps", type=float, default=10.0,
                    help="egress rate of the paced run (default 10 Mbit/s)")
    ap.add_argument("--targets", default="softswitch,ebpf",
                    help="middle boxes besides the bridge: softswitch (Python target), ebpf "
                         "(default both)")
    ap.add_argument("--burst", type=int, default=2, metavar="N",
                    help="AF_PACKET senders of the burst run (default 2; 0 skips it)")
    args = ap.parse_args(argv)
    if not 0.5 <= args.seconds <= 60 or not 10 <= args.pings <= 100000 or not 0.1 <= args.rate_mbps <= 100:
        print("error: --seconds must be in 0.5..60, --pings in 10..100000, --rate-mbps in 0.1..100",
              file=sys.stderr)
        return 2
    kinds = ["bridge"] + [k for k in args.targets.split(",") if k]
    if any(k not in ("bridge", "softswitch", "ebpf") for k in kinds) or not 0 <= args.burst <= 16:
        print("error: --targets takes softswitch and/or ebpf; --burst 0..16", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("error: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    results = {}
    bursts: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-switchd-") as tmp:
        for kind in kinds:
            with path(kind, Path(tmp)) as (h1, h2):
                measure_rtt(h1, h2, 20)                      # warm up (caches, first compile)
                rtt = measure_rtt(h1, h2, args.pings)
                pps, sent, _ = measure_rate(h1, h2, args.seconds)
                results[kind] = (pps, sent, rtt)
                if args.burst:
                    bursts[kind] = measure_burst(h1, h2, args.seconds, args.burst)
        paced_bps = 0.0
        if "softswitch" in kinds:
            with path("softswitch", Path(tmp), rate_mbps=args.rate_mbps) as (h1, h2):
                _, _, paced_bps = measure_rate(h1, h2, args.seconds, payload=1000)
    print(f"{'path':<12}{'delivered pkt/s':>16}{'sent pkt/s':>12}{'rtt median us':>15}{'rtt p99 us':>12}"
          + (f"{'burst pkt/s':>14}{'burst sent':>12}" if bursts else ""))
    for kind, (pps, sent, rtt) in results.items():
        extra = f"{bursts[kind][0]:>14,.0f}{bursts[kind][1]:>12,.0f}" if kind in bursts else ""
        print(f"{kind:<12}{pps:>16,.0f}{sent / args.seconds:>12,.0f}"
              f"{np.median(rtt):>15.1f}{np.percentile(rtt, 99):>12.1f}{extra}")
    bpps, _, brtt = results["bridge"]
    for kind in kinds[1:]:
        spps, _, srtt = results[kind]
        print(f"{kind} / bridge rate (one UDP sender): {spps / bpps:.3f}")
        if kind in bursts:
            print(f"{kind} / bridge rate ({args.burst} AF_PACKET senders): "
                  f"{bursts[kind][0] / bursts['bridge'][0]:.3f}")
        print(f"{kind} added latency per pass: median {(np.median(srtt) - np.median(brtt)) / 2:.1f} us, "
              f"p99 {(np.percentile(srtt, 99) - np.percentile(brtt, 99)) / 2:.1f} us")
    if "softswitch" in results and "ebpf" in results:
        print(f"ebpf / softswitch rate (one UDP sender): {results['ebpf'][0] / results['softswitch'][0]:.2f}")
        if bursts:
            print(f"ebpf / softswitch rate ({args.burst} AF_PACKET senders): "
                  f"{bursts['ebpf'][0] / bursts['softswitch'][0]:.2f}")
    if paced_bps:
        print(f"paced egress port, 1042-byte frames: configured {args.rate_mbps:g} Mbit/s, delivered "
              f"{paced_bps / 1e6:.3f} Mbit/s (ratio {paced_bps / (args.rate_mbps * 1e6):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
