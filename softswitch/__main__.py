"""Command line of the software switch: ``python -m softswitch COMMAND ...``.

Each subcommand lives in its own module under ``softswitch.cli`` and exposes
``register(subparsers)``; this file only dispatches, so adding a command never
touches another command's code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order `--help` lists them.
COMMANDS = ("check", "run", "stf", "switch", "demo")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m softswitch",
        description="A P4_16 v1model software switch that runs P4 source directly.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"softswitch.cli.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"softswitch.cli.{name}":
                continue  # command not built yet
            raise
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
