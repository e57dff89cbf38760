"""Shared bits of the run/stf/demo commands: load a program, report errors, format output."""
from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from softswitch.errors import SoftswitchError


def add_program_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("program", help="P4_16 v1model source file")
    p.add_argument("-I", dest="include_dirs", action="append", default=[], metavar="DIR",
                   help="add DIR to the #include search path")
    p.add_argument("-D", dest="defines", action="append", default=[], metavar="NAME[=VAL]",
                   help="define a preprocessor macro")


def target_help() -> str:
    """--target's help: each registered target and what it is."""
    from softswitch.targets import TARGETS
    return "; ".join(f"{t.name}: {t.summary}" for t in TARGETS.values())


def add_target_args(p: argparse.ArgumentParser) -> None:
    from softswitch.targets import DEFAULT_TARGET, TARGETS
    p.add_argument("--target", choices=tuple(TARGETS), default=DEFAULT_TARGET, help=target_help())
    p.add_argument("--hook", choices=("tc", "xdp"), default="tc",
                   help="with --target ebpf: the kernel hook (tc, the default; xdp: no clones, "
                        "multicast, resubmit, recirculate or queue rates)")
    p.add_argument("--dump-c", metavar="FILE",
                   help="with --target ebpf: write the generated C to FILE ('-' for stdout)")


def parse_defines(items: list[str]) -> dict[str, str]:
    out = {}
    for d in items:
        name, _, val = d.partition("=")
        out[name] = val or "1"
    return out


def load_switch(args: argparse.Namespace) -> Any:
    """Build the Switch; on a bad program print `file:line:col: error: ...` and return None."""
    from softswitch.frontend.errors import P4Error
    from softswitch.targets import DEFAULT_TARGET, target_named
    from softswitch.targets.python.switch import Switch
    target = getattr(args, "target", DEFAULT_TARGET)
    extra: dict[str, Any] = {}
    dump = getattr(args, "dump_c", None)
    hook = getattr(args, "hook", "tc")
    if hook != "tc":
        extra["hook"] = hook
    try:
        if dump and target_named(target).dumps_source:
            extra["dump_c"] = sys.stdout if dump == "-" else open(dump, "w", encoding="utf-8")  # noqa: SIM115
        return Switch.from_file(args.program, include_dirs=args.include_dirs,
                                defines=parse_defines(args.defines), target=target, **extra)
    except P4Error as exc:
        print(exc.render(), file=sys.stderr)
    except (SoftswitchError, OSError) as exc:
        print(format_error(args.program, exc), file=sys.stderr)
    return None


def format_error(path: str, exc: BaseException) -> str:
    """`file:line:col: error: message` when the message starts with a location, else `path: error: ...`."""
    text = str(exc)
    m = re.match(r"^(\S+?:\d+:\d+): (.*)$", text, re.DOTALL)
    if m:
        return f"{m.group(1)}: error: {m.group(2)}"
    return f"{path}: error: {text}"


def summary(data: bytes) -> str:
    """One-line scapy summary of an Ethernet frame (or a note when it does not decode)."""
    try:
        import scapy.layers.inet  # noqa: F401  (binds IP/UDP/TCP to Ether)
        from scapy.layers.l2 import Ether
        return Ether(data).summary()
    except Exception as exc:  # noqa: BLE001 - scapy raises many kinds on odd bytes
        return f"(not decoded: {exc})"


def parse_hex(text: str, what: str) -> bytes:
    s = "".join(text.split()).lower()
    s = s.removeprefix("0x")
    try:
        return bytes.fromhex(s)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{what}: {text!r} is not hex bytes ({exc})") from exc
