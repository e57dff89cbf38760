"""``python -m controller.cc demo``: HPCC vs DCQCN on a fluid incast.

Examples:
  python -m controller.cc demo
  python -m controller.cc demo --flows 16 --rate-gbps 100 --rtt-us 8 --out out/
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from common import argtypes
from controller.cc.demo import demo
from controller.cc.errors import CcError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.cc",
                                 description="Congestion control engines (demo).",
                                 epilog=__doc__.split("Examples:")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="HPCC vs DCQCN on an incast (fluid model)")
    d.add_argument("--flows", type=argtypes.bounded_int(1, 1_000_000, what="flows"), default=8)
    d.add_argument("--rate-gbps", type=argtypes.positive, default=25.0)
    d.add_argument("--rtt-us", type=argtypes.positive, default=10.0)
    d.add_argument("--ms", type=argtypes.positive, default=10.0, help="duration (ms)")
    d.add_argument("--out", type=Path, default=None, help="folder for cc_incast.png")
    args = ap.parse_args(argv)
    try:
        for line in demo(n_flows=args.flows, link_bps=args.rate_gbps * 1e9,
                         rtt_s=args.rtt_us * 1e-6, duration_s=args.ms * 1e-3,
                         out_dir=args.out):
            print(line)
    except (CcError, OSError) as e:
        print(f"controller.cc: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
