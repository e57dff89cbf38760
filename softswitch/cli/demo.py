"""`python -m softswitch demo`: the bundled IPv4 example on sample packets, with the trace.

Loads p4/examples/ipv4_forward.p4 with its entries, sends a few packets
(routed by the longest prefix, TTL expiry, no route, not IPv4) and prints what
happens to each in the pipeline.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from softswitch.cli._load import summary
from softswitch.errors import SoftswitchError

EXAMPLES = Path(__file__).resolve().parents[2] / "p4" / "examples"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("demo", help="run the bundled IPv4 example on sample packets",
                       description=__doc__)
    p.set_defaults(func=main)


def sample_packets() -> list[tuple[str, bytes]]:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    eth = Ether(dst="00:00:00:00:01:00", src="00:00:00:00:00:01")

    def udp(dst: str, ttl: int = 64) -> bytes:
        return bytes(eth / IP(src="10.0.1.1", dst=dst, ttl=ttl) / UDP(sport=1234, dport=80) / Raw(b"hello"))

    return [
        ("10.0.2.2 matches 10.0.0.0/16", udp("10.0.2.2")),
        ("10.0.3.3 matches the longer 10.0.3.0/24", udp("10.0.3.3")),
        ("TTL 1 expires", udp("10.0.3.3", ttl=1)),
        ("no route to 192.168.0.1", udp("192.168.0.1")),
        ("ARP is not IPv4", bytes(Ether(dst="ff:ff:ff:ff:ff:ff", src="00:00:00:00:00:01", type=0x0806)
                                  / Raw(b"\x00" * 28))),
    ]


def main(args: argparse.Namespace) -> int:
    from softswitch.cli.run import apply_entries
    from softswitch.frontend.errors import P4Error
    from softswitch.targets.python.switch import Switch
    program = EXAMPLES / "ipv4_forward.p4"
    try:
        sw = Switch.from_file(program)
        apply_entries(sw, str(EXAMPLES / "ipv4_forward.entries"))
    except P4Error as exc:
        print(exc.render(), file=sys.stderr)
        return 2
    except (SoftswitchError, OSError) as exc:
        print(f"demo: error: {exc}", file=sys.stderr)
        return 2
    print(f"softswitch demo: {program.name} with entries:")
    for e in sw.runtime.table_entries("MyIngress.ipv4_lpm"):
        print(f"  MyIngress.ipv4_lpm {e.describe()}")
    for title, data in sample_packets():
        print(f"\n== {title}")
        print(f"in : port 1 {summary(data)}")
        outs, events = sw.process_packet(1, data, trace=True)
        for ev in events:
            print("     " + ev.format())
        for o in outs:
            print(f"out: port {o.port} {summary(o.data)}")
        if not outs:
            print("out: (dropped)")
    print("\ncounters of MyIngress.ipv4_lpm (packets, bytes):")
    for e in sw.runtime.table_entries("MyIngress.ipv4_lpm"):
        print(f"  {e.describe()}: {e.packets} packets, {e.bytes} bytes")
    return 0
