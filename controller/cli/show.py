"""``python -m controller show {switches,flows,hops,losses}``: what the running controller knows.

Reads OUT/controller_state.json, which `python -m controller run --out OUT` rewrites
every interval (see controller/runner/state.py for its schema); in a test-bed results
folder (`demo --out DIR`, `experiment ... --out DIR`) OUT/logs/controller/ holds it.

examples:
  python -m controller show switches
  python -m controller show flows --out out/
  python -m controller show flows --out results/demo       # a demo's results folder
  python -m controller show losses --json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from controller.runner.state import VIEWS
    p = sub.add_parser("show", help="show the running controller's switches, flows, hops or losses",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("view", choices=VIEWS)
    p.add_argument("--out", default="out", metavar="DIR", help="the controller's --out (default ./out)")
    p.add_argument("--state", metavar="FILE", help="state file (default OUT/controller_state.json)")
    p.add_argument("--json", action="store_true", help="print the view as JSON")
    p.set_defaults(func=show)


def state_path(out: Path, name: str) -> Path:
    """OUT/NAME, or where a test-bed results folder (the demo's, an experiment's) keeps
    the controller's files: OUT/logs/controller/NAME."""
    direct = out / name
    nested = out / "logs" / "controller" / name
    return nested if not direct.exists() and nested.exists() else direct


def show(args: argparse.Namespace) -> int:
    from controller.runner.state import STATE_FILE, StateError, format_view, read_state
    path = Path(args.state) if args.state else state_path(Path(args.out), STATE_FILE)
    try:
        state = read_state(path)
    except StateError as exc:
        print(f"controller show: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(state.get(args.view, []), indent=1))
        return 0
    age = time.time() - float(state.get("updated_unix_s", 0))
    running = "" if state.get("running", True) else " (controller stopped)"
    print(f"# {state.get('topology', '?')}: state of pid {state.get('pid', '?')}, {age:.1f} s old{running}")
    print(format_view(args.view, state))
    return 0
