"""`python -m softswitch run PROGRAM.p4 --port N --packet HEX [--entries FILE]`.

Sends packets through the program and prints the packets that come out (port,
bytes, scapy summary) and the trace: parser states, extracted headers, table
lookups with key/hit/entry/action, drops with their reason.
"""
from __future__ import annotations

import argparse
import json
import sys

from softswitch.cli._load import add_program_args, load_switch, parse_hex, summary
from softswitch.errors import SoftswitchError
from softswitch.v1model.ports import DROP_PORT


def _port(text: str) -> int:
    """An ingress port of the v1model program the command runs: below the drop port."""
    v = int(text, 0)
    if not 0 <= v < DROP_PORT:
        raise argparse.ArgumentTypeError(f"port {v} outside 0..{DROP_PORT - 1}")
    return v


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="send packets through a P4 program and print the trace",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="example: python -m softswitch run p4/examples/ipv4_forward.p4 "
                              "--entries p4/examples/ipv4_forward.entries --port 1 --packet 0000...")
    add_program_args(p)
    p.add_argument("--port", type=_port, default=0, help="ingress port (default 0)")
    p.add_argument("--packet", action="append", required=True, metavar="HEX",
                   type=lambda s: parse_hex(s, "--packet"), help="packet bytes in hex (repeatable)")
    p.add_argument("--entries", metavar="FILE",
                   help="table entries and sessions in STF syntax (add, setdefault, mirroring_add, mc_*)")
    p.add_argument("--no-trace", action="store_true", help="print only the output packets")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per packet (input, trace events, outputs) for tools")
    p.add_argument("--dump-code", action="store_true",
                   help="print the code the program was compiled to (Python; C with --target ebpf), then run")
    p.set_defaults(func=main)


def apply_entries(sw: object, path: str) -> None:
    from softswitch.stf import StfRunner, parse_stf
    with open(path, encoding="utf-8") as f:
        cmds = parse_stf(f.read(), path)
    bad = [c for c in cmds if c.verb in ("packet", "expect")]
    if bad:
        raise SoftswitchError(f"{path}:{bad[0].line}: entries files hold configuration only, not {bad[0].verb}")
    StfRunner(sw).run(cmds, path)


def main(args: argparse.Namespace) -> int:
    sw = load_switch(args)
    if sw is None:
        return 2
    if args.dump_code:
        # the generated code of the target that runs it: Python here, C in the kernel
        generated = getattr(sw, "generated", None)
        print(generated.source if generated is not None else sw.program.source)
    try:
        if args.entries:
            apply_entries(sw, args.entries)
        for data in args.packet:
            outs, events = sw.process_packet(args.port, data, trace=not args.no_trace)
            if args.json:
                print(json.dumps({
                    "in": {"port": args.port, "data": data.hex()},
                    "events": [{"kind": e.kind, "block": e.block, **e.detail} for e in events],
                    "out": [{"port": o.port, "data": o.data.hex(), "instance_type": o.instance_type}
                            for o in outs]}, default=str))
                continue
            print(f"packet in: port {args.port}, {len(data)} bytes: {summary(data)}")
            for e in events:
                print("  " + e.format())
            if not outs:
                print("  (no packet out)")
            for o in outs:
                print(f"out: port {o.port}, {len(o.data)} bytes: {o.data.hex()}")
                print(f"     {summary(o.data)}")
    except (SoftswitchError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
