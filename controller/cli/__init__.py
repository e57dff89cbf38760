"""Command line of the controller: ``python -m controller COMMAND`` (run, show, entries,
diagnose, web).

Each command lives in its own module with ``register(subparsers)``; `main` only
dispatches and is the one place that exits.
"""
from __future__ import annotations

import argparse
import sys

from . import certs, diagnose, entries, keys, run, show, web

COMMANDS = (run, show, entries, diagnose, certs, keys, web)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m controller",
                                 description="INT / RoCEv2 controller: programs the switches over "
                                             "P4Runtime, collects telemetry, runs HPCC and loss maps.")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for mod in COMMANDS:
        mod.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
