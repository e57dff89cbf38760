"""What a program costs the kernel's verifier on ``--target ebpf``.

``python -m softswitch.tools.verifier_cost PROGRAM.p4 [...] [--hook tc|xdp]`` loads each
program as the switch would and prints the instructions the verifier walked (its
budget is 1,000,000 per program) and the loaded program's length. Why: each construct
the generator supports adds code on every path the verifier explores; this is how the
README's costs are measured.
"""
from __future__ import annotations

import argparse
import sys

from softswitch.backends.ebpf.kernel import verified_insns
from softswitch.errors import SoftswitchError
from softswitch.targets.python.switch import Switch


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("programs", nargs="+")
    ap.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR")
    ap.add_argument("--hook", choices=("tc", "xdp"), default="tc")
    args = ap.parse_args(argv)
    status = 0
    for prog in args.programs:
        try:
            with Switch.from_file(prog, include_dirs=args.include_dirs, target="ebpf", hook=args.hook) as sw:
                walked, length = verified_insns(sw.kernel.fd)
        except SoftswitchError as exc:
            print(f"{prog}: error: {exc}", file=sys.stderr)
            status = 2
            continue
        print(f"{prog}: verifier walked {walked:,} instructions ({walked / 1e6:.3f} M of 1 M), "
              f"program {length:,} instructions")
    return status


if __name__ == "__main__":
    sys.exit(main())
