"""``python -m softswitch check PROGRAM.p4 [--p4info OUT] [-I DIR] [-D NAME=VAL]``.

Checks a P4_16 program (preprocess, parse, names, types, widths) and optionally writes
its P4Info.  Silent with exit status 0 when the program is fine; otherwise prints
``file:line:col: error: message`` on stderr and exits 1.
"""
from __future__ import annotations

import argparse
import sys


def _define(text: str) -> tuple[str, str]:
    name, _, value = text.partition("=")
    if not name or not (name[0].isalpha() or name[0] == "_") or not all(c.isalnum() or c == "_" for c in name):
        raise argparse.ArgumentTypeError(f"bad macro name in -D {text!r}; expected NAME or NAME=VALUE")
    return name, value


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "check",
        help="check a P4_16 program and optionally write its P4Info",
        description="Preprocess, parse and type-check a P4_16 v1model program.",
        epilog="examples:\n  python -m softswitch check p4/examples/ipv4_forward.p4\n"
               "  python -m softswitch check prog.p4 --p4info prog.p4info.txtpb -I include -D INT_UDP_PORT=7777",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", help="P4_16 source file")
    p.add_argument("--p4info", metavar="OUT", help="write P4Info (text format; .bin binary, .json JSON)")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add DIR to the #include search path")
    p.add_argument("-D", dest="defines", action="append", default=[], type=_define, metavar="NAME[=VAL]",
                   help="define a preprocessor macro")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from softswitch.frontend import P4Error, load_program

    try:
        program = load_program(args.program, include_dirs=args.include_dirs, defines=dict(args.defines))
        if args.p4info:
            from softswitch.p4info import build_p4info, write_p4info

            write_p4info(build_p4info(program), args.p4info)
    except P4Error as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"{args.p4info}:0:0: error: cannot write P4Info: {exc.strerror}", file=sys.stderr)
        return 1
    return 0
