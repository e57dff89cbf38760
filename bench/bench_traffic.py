"""Goodput of go-back-N, selective repeat and FEC + selective repeat on a lossy 20 ms link.

Every configuration is a real pair of ``python -m traffic p2p`` processes on loopback
addresses.  The link is emulated in the receiving endpoints (this kernel has no netem):
each side holds arriving packets for half the RTT, and the data receiver drops data
and FEC repair packets with a seeded loss model.  ACKs are not dropped.

Each point is run ``--repeat`` times (the loss-free baseline ``2 x repeat - 1`` times)
with different seeds and the median run is shown (the machine is shared, single runs
are noisy).  Figures are relative to the loss-free
goodput measured in the same run with the same rate, so Python speed and header
overhead cancel out:

* ``vs base``  = goodput / loss-free goodput
* ``vs limit`` = goodput / ((1 - mean loss) x loss-free goodput)
* ``vs rate``  = goodput / ((1 - mean loss) x configured rate); the rate counts wire
  bytes (Ethernet/IP/UDP/BTH/ICRC included), so ~0.95 is the best possible at 1 KiB
* ``vs ideal`` = goodput / ((1 - mean loss) x ideal), where ideal is what a perfect
  sender reaches loss-free: the payload share of the wire bytes at the configured rate,
  over the transfer time plus the one round trip the last ACK needs.  This is the
  (1 - loss) x rate limit with headers and the final round trip accounted for.
* ``stall``    = milliseconds the sender's event loop started more than 2 ms late
  during the transfer (process descheduled on a busy host, or a long callback).  The pacer's
  burst allowance is 5 ms, so stalled time beyond it is lost rate no protocol wins back;
  compare runs by it before comparing recovery modes.

The window defaults to 2 x the bandwidth-delay product.  With a window of about one
BDP every loss that needs a retransmission holds the window edge for a round trip and
the sender stalls (IRN sizes the window to one BDP and accepts that); 2 x BDP lets
selective repeat keep sending while repairs are on the way.

FEC k and m follow a simple loss-map policy: k = 32 and the smallest m for which a
block of k + m packets has more than m losses with probability below 1 % (binomial),
and m = 4 for the bursty profile (mean bursts of four).

Examples:
  python -m bench.bench_traffic                    # 100 Mb/s, 4 MiB per point
  python -m bench.bench_traffic --rate 50M --bytes 2M --modes sr,fec
  python -m bench.bench_traffic --json results.json
"""
from __future__ import annotations

import argparse
import json
import math
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from traffic.emulation import parse_loss
from traffic.workloads import parse_rate, parse_size

PROFILES = [("none", "0"), ("0.1%", "0.001"), ("1%", "0.01"), ("5%", "0.05"),
            ("bursty", "ge:0.005,0.25")]


def fec_for(loss_spec: str, k: int = 32, residual: float = 0.01) -> tuple[int, int]:
    """k and the smallest m whose block failure probability is below ``residual``."""
    if loss_spec.startswith("ge:"):
        return k, 4
    p = float(loss_spec)
    for m in range(1, 17):
        n = k + m
        fail = 1.0 - sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(m + 1))
        if fail < residual:
            return k, m
    return k, 16


def builder_rates(n: int = 3000) -> dict[str, float]:
    """Packets per second: template fast path, byte builder, scapy (same packet)."""
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, UDP
    from scapy.packet import Raw

    from formats import roce

    payload = bytes(1024)
    tmpl = roce.PacketTemplate(src="10.0.0.1", dst="10.0.0.2", sport=49152)
    buf = bytearray(roce.pack_bth(roce.Opcode.WRITE_MIDDLE, 5, 0) + payload + bytes(4))
    out = {}
    t = time.perf_counter()
    for i in range(n):
        tmpl.finish(buf, psn=i)
    out["template (in-place PSN + ICRC)"] = n / (time.perf_counter() - t)
    t = time.perf_counter()
    for i in range(n):
        roce.build_udp_payload(src="10.0.0.1", dst="10.0.0.2", sport=49152,
                               opcode=roce.Opcode.WRITE_MIDDLE, dest_qp=5, psn=i,
                               payload=payload)
    out["byte builder (formats.roce)"] = n / (time.perf_counter() - t)
    m = max(1, n // 10)
    t = time.perf_counter()
    for i in range(m):
        bytes(IP(src="10.0.0.1", dst="10.0.0.2", flags="DF") / UDP(sport=49152, dport=4791)
              / BTH(opcode=7, dqpn=5, psn=i) / Raw(payload))
    out["scapy (baseline)"] = m / (time.perf_counter() - t)
    return out


def wire_bytes(msg: int, mtu: int) -> int:
    """Bytes one RDMA WRITE of ``msg`` bytes puts on the wire (Ethernet to ICRC)."""
    from formats import roce

    npk = max(1, -(-msg // mtu))
    per_pkt = roce.ETH_LEN + roce.IPV4_LEN + roce.UDP_LEN + roce.BTH_LEN + roce.ICRC_LEN
    return msg + npk * per_pkt + roce.RETH_LEN


def ideal_goodput(*, rate: float, total: int, msg: int, rtt_s: float, mtu: int = 1024) -> float:
    """Loss-free goodput of a perfect paced sender: wire time plus the last ACK's RTT."""
    count = max(1, total // msg)
    t = count * wire_bytes(msg, mtu) * 8 / rate + rtt_s
    return count * msg * 8 / t


def bdp_window(*, rate: float, rtt_s: float, mtu: int = 1024, factor: float = 2.0) -> int:
    """``factor`` x the bandwidth-delay product, in full-MTU packets."""
    return max(1, round(factor * rate * rtt_s / 8 / (wire_bytes(mtu, mtu) - 16)))


def run_point(mode: str, loss_spec: str, *, rate: float, total: int, msg: int, rtt_s: float,
              timeout_s: float, seed: int, window: int = 300) -> dict:
    net = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"
    hosts = f"{net}.1,{net}.2"
    k, m = fec_for(loss_spec)
    count = max(1, total // msg)
    common = ["--hosts", hosts, "-s", str(msg), "-c", str(count), "--rate", f"{rate:.0f}",
              "--mode", mode, "--fec", f"{k},{m}", "--window", str(window), "--inflight", "4",
              "--delay", f"{rtt_s / 2}", "--timeout", f"{timeout_s}", "--seed", str(seed),
              "--rto-min", f"{max(0.05, 2 * rtt_s)}", f"{timeout_s + 1}"]
    start_at = time.time() + 1.5
    with tempfile.TemporaryDirectory(prefix="bench-traffic") as d:
        procs = []
        for rank in (0, 1):
            extra = ["--loss", loss_spec] if rank == 1 else []
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "traffic", "p2p", *common, "--rank", str(rank),
                 "--start-at", f"{start_at:.3f}", "-o", f"{d}/r{rank}.json", *extra],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        for p in procs:
            try:
                p.wait(timeout=timeout_s + 30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        try:
            tx = json.loads(Path(d, "r0.json").read_text())
            rx = json.loads(Path(d, "r1.json").read_text())
        except (OSError, json.JSONDecodeError):
            return {"mode": mode, "loss": loss_spec, "finished": False, "goodput_bps": 0.0}
    reqs = tx["endpoint"]["requesters"].values()
    resps = rx["endpoint"]["responders"].values()
    delivered = rx["bytes_received"]
    return {
        "mode": mode, "loss": loss_spec, "fec": [k, m] if mode == "fec" else None,
        "finished": tx["finished"] and rx["finished"],
        "goodput_bps": delivered * 8 / max(1e-9, tx["completion_s"]),
        "completion_s": tx["completion_s"],
        "fct_p99_s": tx["fct_s"]["p99"],
        "retx_pkts": sum(r["retx_pkts"] for r in reqs),
        "timeouts": sum(r["timeouts"] for r in reqs),
        "data_pkts": sum(r["tx_data_pkts"] for r in reqs),
        "repair_pkts": sum(r["repair_pkts"] for r in reqs),
        "fec_repaired": sum(r["fec_repaired"] for r in resps),
        "injected_drops": rx["endpoint"]["endpoint"]["injected_drops"],
        "kernel_drops": rx["endpoint"]["endpoint"]["kernel_drops"]
        + tx["endpoint"]["endpoint"]["kernel_drops"],
        "stall_s": tx.get("stall_s", 0.0),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 epilog=__doc__[__doc__.index("Examples:"):],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=parse_rate, default=100e6, help="QP rate (default 100M)")
    ap.add_argument("--bytes", type=parse_size, default=4 << 20, help="bytes per point")
    ap.add_argument("--msg", type=parse_size, default=256 << 10, help="message size")
    ap.add_argument("--rtt", type=float, default=0.020, help="round-trip time, s")
    ap.add_argument("--modes", default="gbn,sr,fec")
    ap.add_argument("--window", type=int, default=None,
                    help="packets in flight per QP (default 2 x the bandwidth-delay "
                         "product, ~460 at 100 Mb/s and 20 ms)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per point")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs per point (different seeds); the median goodput is shown")
    ap.add_argument("--json", metavar="FILE", help="also write every point as JSON")
    args = ap.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    bdp = bdp_window(rate=args.rate, rtt_s=args.rtt, factor=1.0)
    if args.window is None:
        args.window = bdp_window(rate=args.rate, rtt_s=args.rtt)
    ideal = ideal_goodput(rate=args.rate, total=args.bytes, msg=args.msg, rtt_s=args.rtt)
    rates = builder_rates()
    base_pps = rates["scapy (baseline)"]
    print("RoCEv2 packet construction, 1 KiB payload (ICRC included)")
    for name, pps in rates.items():
        print(f"  {name:32} {pps:10.0f} pkt/s  {pps / base_pps:6.1f} x scapy")
    print()
    print(f"RoCEv2 goodput, {args.rate / 1e6:g} Mb/s per QP, RTT {args.rtt * 1e3:g} ms, "
          f"{args.bytes >> 10} KiB per point, median of {args.repeat}, "
          f"window {args.window} packets = {args.window / bdp:.1f} x BDP")
    print("loss in user space at the receiver; kernel receive-buffer drops: kdrop")
    print(f"ideal loss-free goodput (headers + last ACK's round trip): {ideal / 1e6:.1f} Mb/s "
          f"= {ideal / args.rate:.3f} x rate")
    results = []
    base: dict[str, float] = {}
    print(f"{'mode':4} {'loss':6} {'Mb/s':>6} {'vs base':>7} {'vs limit':>8} {'vs rate':>7} "
          f"{'vs ideal':>8} {'retx':>6} {'fecfix':>6} {'drops':>6} {'RTOs':>4} {'p99FCT':>7} "
          f"{'stall':>6}")
    for mode in modes:
        for label, spec in PROFILES:
            runs = [run_point(mode, spec, rate=args.rate, total=args.bytes, msg=args.msg,
                              rtt_s=args.rtt, timeout_s=args.timeout, seed=args.seed + i,
                              window=args.window)
                    for i in range(max(1, args.repeat) * (2 if label == "none" else 1)
                                   - (1 if label == "none" else 0))]
            runs.sort(key=lambda x: x["goodput_bps"])
            r = runs[len(runs) // 2]  # the median run, with its own counters
            r["finished"] = all(x["finished"] for x in runs)
            r["profile"] = label
            results.append(r)
            if label == "none":
                base[mode] = r["goodput_bps"] or 1.0
            loss = parse_loss(spec).model.mean_loss
            vs_base = r["goodput_bps"] / base[mode]
            vs_limit = vs_base / (1 - loss)
            vs_rate = r["goodput_bps"] / ((1 - loss) * args.rate)
            vs_ideal = r["goodput_bps"] / ((1 - loss) * ideal)
            r["vs_base"], r["vs_limit"], r["vs_rate"] = vs_base, vs_limit, vs_rate
            r["vs_ideal"] = vs_ideal
            flag = "" if r["finished"] else " (timed out)"
            if r.get("kernel_drops"):
                flag += f" kdrop {r['kernel_drops']}"
            print(f"{mode:4} {label:6} {r['goodput_bps'] / 1e6:6.1f} {vs_base:7.3f} "
                  f"{vs_limit:8.3f} {vs_rate:7.3f} {vs_ideal:8.3f} {r.get('retx_pkts', 0):6d} "
                  f"{r.get('fec_repaired', 0):6d} "
                  f"{r.get('injected_drops', 0):6d} {r.get('timeouts', 0):4d} "
                  f"{(r.get('fct_p99_s') or 0) * 1e3:5.0f}ms "
                  f"{r.get('stall_s', 0.0) * 1e3:4.0f}ms{flag}")
    fec1 = next((r for r in results if r["mode"] == "fec" and r["profile"] == "1%"), None)
    if fec1:
        k, m = fec1["fec"] or (0, 0)
        print(f"FEC + selective repeat at 1% loss: {fec1['vs_limit']:.3f} of "
              f"(1 - loss) x loss-free goodput,\n  {fec1['vs_ideal']:.3f} of (1 - loss) x ideal "
              f"(aim: >= 0.9; its k={k}, m={m} repair packets alone cost "
              f"{m / (k + m):.3f}),\n  {fec1['vs_rate']:.3f} of (1 - loss) x rate "
              "(wire rate, headers and last round trip included: at most "
              f"{ideal / args.rate:.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
