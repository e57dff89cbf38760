"""`python -m softswitch stf PROGRAM.p4 TEST.stf`: run a p4c STF test.

Exit status 0 when every expectation holds, 1 when one fails (each failure
printed), 2 when the program or the test file cannot be used.
"""
from __future__ import annotations

import argparse
import sys

from softswitch.cli._load import add_program_args, add_target_args, load_switch
from softswitch.errors import SoftswitchError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("stf", help="run an STF test against a P4 program", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program_args(p)
    add_target_args(p)
    p.add_argument("test", help="STF test file")
    p.add_argument("--trace", action="store_true", help="print the packet trace")
    p.add_argument("--strict", action="store_true",
                   help="also fail on packets sent to ports the test never names")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from softswitch.stf import StfRunner, parse_stf
    sw = load_switch(args)
    if sw is None:
        return 2
    try:
        with open(args.test, encoding="utf-8") as f:
            cmds = parse_stf(f.read(), args.test)
        res = StfRunner(sw, trace=args.trace, strict=args.strict).run(cmds, args.test)
    except (SoftswitchError, OSError) as exc:
        print(f"{args.test}: error: {exc}", file=sys.stderr)
        return 2
    finally:
        sw.close()
    for line in res.log:
        print(line)
    for failure in res.failures:
        print(f"FAIL {failure}")
    verdict = "PASS" if res.ok else "FAIL"
    print(f"{verdict}: {args.test}: {res.packets_sent} packets sent, {res.packets_checked} checked, "
          f"{len(res.failures)} failures")
    return 0 if res.ok else 1
