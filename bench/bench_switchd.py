"""Forwarding rate and added latency through one softswitch process between two
namespaces, next to a Linux bridge on the same path (the baseline, same run), for the
Python target (`softswitch`) and the kernel target on its two hooks: tc (`ebpf`,
`--target ebpf`) and XDP (`xdp`: `--hook xdp` in native mode, the hosts' veth ends set
to GRO on and tx checksum offload off as native XDP on veths needs; `xdp-generic`:
generic mode, the hosts as they are).

    h1 --veth-- [ middle namespace: bridge | softswitch | ebpf | xdp | xdp-generic ] --veth-- h2

* rate: h1 sends 64-byte UDP datagrams (to RoCEv2's port 4791 for the INT program) as
  fast as one Python process can for a few seconds; h2 counts what arrives;
  packets/s delivered for each middle box;
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
with its two routes given on the command line, or with ``--program int`` the INT
program p4/int_rocev2.p4 as a one-switch INT domain: h1's port is watched (INT source
on RoCEv2), h2's port is a report-mode sink (INT stripped, a Telemetry Report cloned
to a collector namespace h3 on port 3), so every burst frame (RoCEv2) takes the
program's longest path and makes one report; the collector's interface counter gives
the reports delivered. The XDP hook cannot make the report clones, so with ``--program
int`` the xdp kinds are left out with the refusal printed. Needs root (namespaces, raw
sockets).

Examples:
  python -m bench.bench_switchd
  python -m bench.bench_switchd --seconds 5 --pings 2000
  python -m bench.bench_switchd --targets ebpf --burst 2
  python -m bench.bench_switchd --targets ebpf,xdp,xdp-generic
  python -m bench.bench_switchd --program int --burst 2
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

from common.kernel.netns import Namespace, veth_pair

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"
INT_PROGRAM = ROOT / "p4" / "int_rocev2.p4"
KINDS = ("softswitch", "ebpf", "xdp", "xdp-generic")   # middle boxes besides the bridge
TARGET_ARGV = {"softswitch": [], "ebpf": ["--target", "ebpf"],
               "xdp": ["--target", "ebpf", "--hook", "xdp", "--xdp-mode", "native"],
               "xdp-generic": ["--target", "ebpf", "--hook", "xdp", "--xdp-mode", "generic"]}
SWITCH_MAC = "02:aa:00:00:00:01"
PREFIX = "tsdb"
BLAST = """
import socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
dst, end, n = (sys.argv[1], int(sys.argv[4])), time.monotonic() + float(sys.argv[2]), 0
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


def _hexmac(mac: str) -> str:
    return "0x" + mac.replace(":", "")


def int_entries(h1: Namespace, h2: Namespace, h3: Namespace) -> str:
    """The INT program's entries (STF syntax) for one switch: routes to h1 and h2, INT
    source on RoCEv2 from anywhere, report-mode sink towards h2, reports to h3."""
    return "".join([
        "setdefault SwitchEgress.switch_config set_switch_config(node_id:1)\n",
        *(f"add SwitchIngress.ipv4_lpm dst_addr:0x0a09000{i}/32 ipv4_forward(port:{i}, "
          f"src_mac:{_hexmac(SWITCH_MAC)}, dst_mac:{_hexmac(h.mac)})\n" for i, h in ((1, h1), (2, h2))),
        "add SwitchEgress.port_line_rate port:2 set_line_rate(line_rate_mbps:25000)\n",
        "add SwitchIngress.int_sink egress_port:2 sink_report()\n",
        ("add SwitchIngress.int_watchlist 10 src_addr:0x******** dst_addr:0x******** src_port:0x**** "
        "dst_port:0x12b7 dscp:0b****** int_source(instruction_bitmap:0x9400, ds_instruction:0xe000, "
        "max_hops:8)\n"),
        (f"setdefault SwitchEgress.report_config set_report_config(switch_mac:{_hexmac(SWITCH_MAC)}, "
        f"collector_mac:{_hexmac(h3.mac)}, switch_ip:0x0a090063, collector_ip:0x0a090003, "
        "collector_port:32766, payload_bytes:12, hw_id:1)\n"),
        "mirroring_add 500 3\n"])


@contextlib.contextmanager
def path(kind: str, tmp: Path, *, rate_mbps: float = 0.0, program: str = "ipv4"
         ) -> Iterator[tuple[Namespace, Namespace, Namespace | None]]:
    """Two hosts joined through a middle namespace holding a bridge or a softswitch (and
    a collector h3 on port 3 for the INT program)."""
    made: list[Namespace] = []
    try:
        h1, mid, h2 = (Namespace.create(PREFIX) for _ in range(3))
        made += [h1, mid, h2]
        h3 = Namespace.create(PREFIX) if program == "int" else None
        if h3 is not None:
            made.append(h3)
        for ns in made:
            _quiet(ns)
        a, m1 = veth_pair(h1, mid, prefix=PREFIX, addr_a="10.9.0.1/24")
        m2, b = veth_pair(mid, h2, prefix=PREFIX, addr_b="10.9.0.2/24")
        h1.ifname, h1.ip, h1.mac = a.ifname, "10.9.0.1", a.mac
        h2.ifname, h2.ip, h2.mac = b.ifname, "10.9.0.2", b.mac
        ports = [f"1@{m1.ifname}", f"2@{m2.ifname}"]
        if h3 is not None:
            m3, c = veth_pair(mid, h3, prefix=PREFIX, addr_b="10.9.0.3/24")
            h3.ifname, h3.ip, h3.mac = c.ifname, "10.9.0.3", c.mac
            ports.append(f"3@{m3.ifname}")
        h1.run(["ip", "neigh", "replace", h2.ip, "lladdr", h2.mac, "dev", h1.ifname])
        h2.run(["ip", "neigh", "replace", h1.ip, "lladdr", h1.mac, "dev", h2.ifname])
        if kind == "xdp":
            # native XDP on veths: the peers take redirected frames (GRO) and send
            # finished checksums (softswitch/targets/ebpf/xdp_attach.py)
            for h in (h1, h2, h3):
                if h is not None:
                    h.run(["ethtool", "-K", h.ifname, "gro", "on", "tx", "off"])
        if kind == "bridge":
            mid.run(["ip", "link", "add", "br0", "type", "bridge"])
            for ifname in (m1.ifname, m2.ifname):
                mid.run(["ip", "link", "set", ifname, "master", "br0"])
            mid.run(["ip", "link", "set", "br0", "up"])
        else:
            target = TARGET_ARGV[kind]
            entries = tmp / "routes.entries"
            if h3 is not None:
                entries.write_text(int_entries(h1, h2, h3))
            else:
                entries.write_text("".join(
                    f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a09000{i}/32 "
                    f"MyIngress.ipv4_forward(dstAddr:0x{mac.replace(':', '')}, port:{i})\n"
                    for i, mac in ((1, h1.mac), (2, h2.mac))))
            stats = tmp / "stats.json"
            stats.unlink(missing_ok=True)         # its appearance means "ready"
            prog = [str(INT_PROGRAM), "-I", str(ROOT / "p4")] if h3 is not None else [str(PROGRAM)]
            ports_argv = [x for p in ports for x in ("-i", p)]
            mid.popen([sys.executable, "-m", "softswitch", "switch", *prog, "--entries",
                       str(entries), *ports_argv,
                       "--grpc-server-addr", "none", "--stats-file", str(stats), *target,
                       *(["--queue-rate", f"2:{rate_mbps:g}"] if rate_mbps else [])],
                      cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)))
            deadline = time.monotonic() + 60
            while not stats.exists():
                if time.monotonic() > deadline:
                    raise RuntimeError("softswitch did not start within 60 s")
                time.sleep(0.05)
        yield h1, h2, h3
    finally:
        for ns in reversed(made):
            ns.close()


def xdp_refusal(program: Path) -> str:
    """Why `program` does not run on the XDP hook (the generator's refusal), or ''."""
    from softswitch.backends.ebpf import EbpfUnsupported
    from softswitch.backends.ebpf.program import generate_c
    from softswitch.frontend.load import load_program
    from softswitch.lowering import lower_program
    from softswitch.v1model import V1MODEL
    checked = load_program(program, include_dirs=(str(ROOT / "p4"),))
    try:
        generate_c(lower_program(checked, V1MODEL), hook="xdp")
    except EbpfUnsupported as exc:
        return str(exc)
    return ""


def program_cost(repeat: int) -> dict[str, float]:
    """ns per pass of ipv4_forward's kernel program on each hook, for a routed 64-byte
    UDP frame (BPF_PROG_TEST_RUN repeated: the program alone, no device on either side)."""
    from scapy.layers import inet
    from scapy.layers.l2 import Ether

    from softswitch.backends.ebpf.kernel import test_run
    from softswitch.tables import Lpm
    from softswitch.targets.python.switch import Switch
    frame = bytes(Ether(src="02:00:00:00:00:01", dst=SWITCH_MAC) / inet.IP(src="10.9.0.1", dst="10.9.0.2", ttl=255)
                  / inet.UDP(sport=1234, dport=4444) / (b"x" * 18))
    out = {}
    for hook in ("tc", "xdp"):
        with Switch.from_file(PROGRAM, target="ebpf", hook=hook) as sw:
            sw.runtime.table_add("MyIngress.ipv4_lpm", [Lpm(0x0A090002, 32)], "MyIngress.ipv4_forward",
                                 [0x020000000002, 2])
            sw.kernel.set_test_port(1)
            test_run(sw.kernel.fd, frame, repeat=min(repeat, 1000))      # warm up
            out[hook] = float(test_run(sw.kernel.fd, frame, repeat=repeat)[2])
    return out


def _rx_packets(ns: Namespace) -> int:
    res = ns.run(["cat", f"/sys/class/net/{ns.ifname}/statistics/rx_packets"])
    return int(res.stdout.strip())


def measure_burst(h1: Namespace, h2: Namespace, seconds: float, senders: int,
                  h3: Namespace | None = None) -> tuple[float, float, float]:
    """(frames/s arriving at h2's interface, frames/s the senders wrote, frames/s at the
    collector h3) with `senders` AF_PACKET senders in h1 sending 64-byte UDP frames to
    h2, or, with a collector (the INT program), RoCEv2 frames of a 64-byte payload."""
    from scapy.layers import inet
    from scapy.layers.l2 import Ether
    if h3 is not None:
        from formats import roce
        frame = roce.build_frame(eth_src=h1.mac, eth_dst=h2.mac, src=h1.ip, dst=h2.ip, sport=0xC001,
                                 opcode=roce.Opcode.SEND_ONLY, dest_qp=0x11, psn=7, payload=bytes(64))
    else:
        frame = bytes(Ether(src=h1.mac, dst=h2.mac) / inet.IP(src=h1.ip, dst=h2.ip)
                      / inet.UDP(sport=1234, dport=4444) / (b"x" * 18))
    before = _rx_packets(h2)
    before3 = _rx_packets(h3) if h3 is not None else 0
    procs = [h1.popen([sys.executable, "-c", BURST, h1.ifname, str(seconds), frame.hex()],
                      stdout=subprocess.PIPE, text=True) for _ in range(senders)]
    sent = 0
    for p in procs:
        out, _ = p.communicate(timeout=seconds + 30)
        sent += int(out.strip() or 0)
    time.sleep(0.3)
    reports = (_rx_packets(h3) - before3) / seconds if h3 is not None else 0.0
    return (_rx_packets(h2) - before) / seconds, sent / seconds, reports


def _udp(ns: Namespace, port: int) -> socket.socket:
    with ns.enter():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", port))
    return s


def measure_rate(h1: Namespace, h2: Namespace, seconds: float, payload: int = 64, port: int = 4444
                 ) -> tuple[float, int, float]:
    """(delivered packets/s, packets sent, delivered frame bits/s while packets arrived)
    of UDP datagrams to `port` (4791, RoCEv2's, takes the INT program's INT path)."""
    rx = _udp(h2, port)
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
    res = h1.run([sys.executable, "-c", BLAST, h2.ip, str(seconds), str(payload), str(port)],
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
    ap.add_argument("--targets", default=",".join(KINDS),
                    help="middle boxes besides the bridge: softswitch (Python target), ebpf (tc "
                         "hook), xdp (XDP hook, native), xdp-generic (default all)")
    ap.add_argument("--burst", type=int, default=2, metavar="N",
                    help="AF_PACKET senders of the burst run (default 2; 0 skips it)")
    ap.add_argument("--rounds", type=int, default=1, metavar="N",
                    help="measure every middle box N times, interleaved; medians (default 1)")
    ap.add_argument("--program", choices=("ipv4", "int"), default="ipv4",
                    help="the switches' program: ipv4_forward.p4 (default) or the INT program "
                         "int_rocev2.p4 (INT source, report-mode sink, a report per RoCEv2 frame)")
    args = ap.parse_args(argv)
    if not 0.5 <= args.seconds <= 60 or not 10 <= args.pings <= 100000 or not 0.1 <= args.rate_mbps <= 100 \
            or not 1 <= args.rounds <= 20:
        print("error: --seconds must be in 0.5..60, --pings in 10..100000, --rate-mbps in 0.1..100, "
              "--rounds in 1..20", file=sys.stderr)
        return 2
    kinds = ["bridge"] + [k for k in args.targets.split(",") if k]
    if any(k not in ("bridge", *KINDS) for k in kinds) or not 0 <= args.burst <= 16:
        print(f"error: --targets takes {', '.join(KINDS)}; --burst 0..16", file=sys.stderr)
        return 2
    if args.program == "int" and any(k.startswith("xdp") for k in kinds):
        print(f"xdp: not run: {xdp_refusal(INT_PROGRAM)}")
        kinds = [k for k in kinds if not k.startswith("xdp")]
    if os.geteuid() != 0:
        print("error: needs root (network namespaces, raw sockets)", file=sys.stderr)
        return 2
    runs: dict[str, list[tuple[float, float, np.ndarray]]] = {k: [] for k in kinds}
    burst_runs: dict[str, list[tuple[float, float, float]]] = {k: [] for k in kinds}
    with tempfile.TemporaryDirectory(prefix="bench-switchd-") as tmp:
        # rounds interleave the middle boxes, so a change of the machine's load over the
        # run falls on all of them; each figure is the median of the rounds
        for _ in range(args.rounds):
            for kind in kinds:
                with path(kind, Path(tmp), program=args.program) as (h1, h2, h3):
                    measure_rtt(h1, h2, 20)                      # warm up (caches, first compile)
                    rtt = measure_rtt(h1, h2, args.pings)
                    got, wrote, _ = measure_rate(h1, h2, args.seconds,
                                                 port=4791 if args.program == "int" else 4444)
                    runs[kind].append((got, float(wrote), rtt))
                    if args.burst:
                        burst_runs[kind].append(measure_burst(h1, h2, args.seconds, args.burst, h3))
        results = {k: (float(np.median([r[0] for r in v])), float(np.median([r[1] for r in v])),
                       np.concatenate([r[2] for r in v])) for k, v in runs.items()}
        bursts = {k: tuple(float(x) for x in np.median(np.asarray(v), axis=0)) for k, v in burst_runs.items() if v}
        paced_bps = 0.0
        if "softswitch" in kinds and args.program == "ipv4":
            with path("softswitch", Path(tmp), rate_mbps=args.rate_mbps) as (h1, h2, _):
                _, _, paced_bps = measure_rate(h1, h2, args.seconds, payload=1000)
    cost = program_cost(100_000) if args.program == "ipv4" and any(
        k in kinds for k in ("ebpf", "xdp", "xdp-generic")) else {}
    reports = args.program == "int" and bool(bursts)
    print(f"program: {args.program}, {args.rounds} round(s), medians")
    print(f"{'path':<12}{'delivered pkt/s':>16}{'sent pkt/s':>12}{'rtt median us':>15}{'rtt p99 us':>12}"
          + (f"{'burst pkt/s':>14}{'burst sent':>12}" if bursts else "")
          + (f"{'reports/s':>12}" if reports else ""))
    for kind, (pps, sent, rtt) in results.items():
        extra = f"{bursts[kind][0]:>14,.0f}{bursts[kind][1]:>12,.0f}" if kind in bursts else ""
        if reports and kind in bursts:
            extra += f"{bursts[kind][2]:>12,.0f}"
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
    for kind, base in [(k, b) for k in ("ebpf", "xdp", "xdp-generic") for b in ("softswitch", "ebpf")
                       if k != b and k in results and b in results]:
        print(f"{kind} / {base} rate (one UDP sender): {results[kind][0] / results[base][0]:.2f}")
        if kind in bursts and base in bursts:
            print(f"{kind} / {base} rate ({args.burst} AF_PACKET senders): "
                  f"{bursts[kind][0] / bursts[base][0]:.2f}")
    if cost:
        print(f"program cost per pass (BPF_PROG_TEST_RUN x 100,000, no devices): tc {cost['tc']:.0f} ns, "
              f"xdp {cost['xdp']:.0f} ns (xdp / tc {cost['xdp'] / cost['tc']:.2f})")
    if paced_bps:
        print(f"paced egress port, 1042-byte frames: configured {args.rate_mbps:g} Mbit/s, delivered "
              f"{paced_bps / 1e6:.3f} Mbit/s (ratio {paced_bps / (args.rate_mbps * 1e6):.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
