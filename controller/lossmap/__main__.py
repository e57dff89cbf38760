"""``python -m controller.lossmap demo``: a loss map on a synthetic leaf-spine trace.

Examples:
  python -m controller.lossmap demo
  python -m controller.lossmap demo --packets 200000 --target 1e-5 --out out/
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from controller.lossmap.demo import demo
from controller.lossmap.errors import LossMapError


def _packets(s: str) -> int:
    v = int(s)
    if not 1000 <= v <= 10_000_000:
        raise argparse.ArgumentTypeError(f"{s!r} packets: use 1000..10000000")
    return v


def _target(s: str) -> float:
    v = float(s)
    if not 0 < v < 1:
        raise argparse.ArgumentTypeError(f"{s!r}: a residual loss target is in (0, 1)")
    return v


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m controller.lossmap",
                                 description="Loss maps (demo).",
                                 epilog=__doc__.split("Examples:")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="loss map, burst fit and FEC on a synthetic trace")
    d.add_argument("--packets", type=_packets, default=50_000, help="packets per flow")
    d.add_argument("--target", type=_target, default=1e-4, help="residual loss target")
    d.add_argument("--seed", type=int, default=1)
    d.add_argument("--out", type=Path, default=None, help="folder for the PNG files")
    args = ap.parse_args(argv)
    try:
        for line in demo(out_dir=args.out, packets_per_flow=args.packets, seed=args.seed,
                         target_residual=args.target):
            print(line)
    except (LossMapError, OSError) as e:
        print(f"controller.lossmap: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
