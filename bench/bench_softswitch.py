"""Packets per second through the softswitch compiled pipeline (one core).

Measures, in one process and one run:
* baseline: a minimal "wire" program (parse Ethernet, set egress_spec, emit) —
  the fixed cost of the v1model pipeline around any program;
* the IPv4 forwarding example (LPM, MAC rewrite, TTL, checksum verify/update)
  with 1,000 routes installed;
* the INT program of this project (p4/int_rocev2.p4) when it is present: a
  RoCEv2 packet routed and turned into an INT packet (first hop: source plus
  transit record), with the entries its README documents; if those names change,
  the same program with no entries (every packet dropped early).
Prints packets/s and the ratio to the baseline. The aim for IPv4 is >= 30,000
packets/s on one core.

Examples:
  python -m bench.bench_softswitch
  python -m bench.bench_softswitch --packets 50000
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from softswitch.tables import Lpm
from softswitch.targets.python.switch import Switch

ROOT = Path(__file__).resolve().parent.parent

WIRE = """
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
struct h_t { eth_t eth; }
struct m_t { }
parser P(packet_in p, out h_t h, inout m_t m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; }
}
control V(inout h_t h, inout m_t m) { apply { } }
control I(inout h_t h, inout m_t m, inout standard_metadata_t sm) { apply { sm.egress_spec = 2; } }
control E(inout h_t h, inout m_t m, inout standard_metadata_t sm) { apply { } }
control C(inout h_t h, inout m_t m) { apply { } }
control D(packet_out p, in h_t h) { apply { p.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def udp_packet(dst: str) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    return bytes(Ether(dst="00:00:00:00:01:00", src="00:00:00:00:00:01")
                 / IP(src="10.0.1.1", dst=dst, ttl=64) / UDP(sport=1234, dport=4791) / Raw(b"x" * 64))


def int_source_setup(sw: Switch) -> bytes:
    """Entries that make the INT program route a RoCEv2 packet and add INT to it."""
    from formats import roce
    from softswitch.tables import Lpm, Ternary
    rt = sw.runtime
    rt.table_set_default("SwitchEgress.switch_config", "set_switch_config", [1])
    rt.table_add("SwitchIngress.ipv4_lpm", [Lpm(0x0A000200, 24)], "ipv4_forward",
                 [2, 0x02AA00000001, 0x020000000201])
    rt.table_add("SwitchIngress.int_watchlist",
                 [Ternary(0, 0), Ternary(0, 0), Ternary(0, 0), Ternary(4791, 0xFFFF), Ternary(0, 0)],
                 "int_source", [0x9400, 0xE000, 8], priority=10)
    frame = roce.build_frame(eth_src="02:00:00:00:01:01", eth_dst="02:aa:00:00:00:01",
                             src="10.0.1.1", dst="10.0.2.1", sport=0xC001,
                             opcode=roce.Opcode.SEND_ONLY, dest_qp=0x11, psn=7,
                             payload=bytes(64), tos=0, ttl=64, dport=4791)
    outs = sw.process(1, frame)
    if len(outs) != 1 or len(outs[0][1]) <= len(frame):
        raise RuntimeError(f"the frame did not come out with INT added: {outs}")
    return frame


def rate(sw: Switch, data: bytes, packets: int, port: int = 1) -> tuple[float, int]:
    """Best of three runs, packets/s; also the number of packets that came out per run."""
    best = 0.0
    out = 0
    v1 = sw.v1
    for _ in range(3):
        out = 0
        t0 = time.perf_counter()
        for _ in range(packets):
            outs, _ = v1.process_packet(port, data)
            out += len(outs)
        dt = time.perf_counter() - t0
        best = max(best, packets / dt)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--packets", type=int, default=20000, help="packets per run (default 20000)")
    args = ap.parse_args(argv)
    if args.packets <= 0:
        ap.error("--packets must be positive")
    data = udp_packet("10.0.2.2")
    rows = []
    wire = Switch.from_source(WIRE, filename="wire.p4")
    base, _ = rate(wire, data, args.packets)
    rows.append(("wire (baseline)", base, args.packets))

    ipv4 = Switch.from_file(ROOT / "p4" / "examples" / "ipv4_forward.p4")
    for i in range(1000):
        ipv4.runtime.table_add("MyIngress.ipv4_lpm", [Lpm((10 << 24) | (i << 8), 24)],
                               "MyIngress.ipv4_forward", [0x000000000200 + i, 1 + i % 8])
    ipv4.runtime.table_add("MyIngress.ipv4_lpm", [Lpm(10 << 24, 8)], "MyIngress.ipv4_forward", [2, 2])
    r, out = rate(ipv4, udp_packet("10.0.200.7"), args.packets)
    rows.append(("IPv4 forwarding, 1001 routes", r, out))

    int_p4 = ROOT / "p4" / "int_rocev2.p4"
    if int_p4.exists():
        try:
            sw = Switch.from_file(int_p4, include_dirs=[str(ROOT / "p4" / "include")])
        except Exception as exc:  # noqa: BLE001 - the INT program belongs to another area
            print(f"(INT program skipped: {exc})")
        else:
            try:
                frame = int_source_setup(sw)
                r, out = rate(sw, frame, args.packets)
                rows.append(("INT source + transit (RoCEv2)", r, out))
            except Exception as exc:  # noqa: BLE001 - entry names are the INT program's
                print(f"(INT entries not installed: {exc}; measuring with no entries)")
                r, out = rate(sw, data, args.packets)
                rows.append(("INT program, no entries", r, out))
    print(f"softswitch compiled pipeline, {args.packets} packets per run, best of 3, one core")
    print(f"{'program':32} {'packets/s':>12} {'vs baseline':>12} {'out/run':>8}")
    for name, r, out in rows:
        print(f"{name:32} {r:12,.0f} {r / base:12.2f} {out:8}")
    ipv4_rate = rows[1][1]
    print(f"IPv4 aim >= 30,000 packets/s: {'met' if ipv4_rate >= 30000 else 'NOT met'} ({ipv4_rate:,.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
