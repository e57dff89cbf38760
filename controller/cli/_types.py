"""argparse `type=` checkers: bad values are rejected at the edge with a clear message."""
from __future__ import annotations

import argparse


def port(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"port {text!r} is not a number") from None
    if not 0 <= v <= 65535:
        raise argparse.ArgumentTypeError(f"port {v} is outside 0..65535")
    return v


def positive(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{v} must be > 0")
    return v


def election_id(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"election id {text!r} is not a number") from None
    if not 1 <= v < 1 << 128:
        raise argparse.ArgumentTypeError(f"election id {v} is outside 1..2^128-1")
    return v


def agent(text: str) -> tuple[str, tuple[str, int]]:
    """HOST=ADDR:PORT -> (host, (addr, port))."""
    host, sep, rest = text.partition("=")
    addr, sep2, port_s = rest.rpartition(":")
    if not sep or not sep2 or not host or not addr:
        raise argparse.ArgumentTypeError(f"--agent {text!r}: expected HOST=ADDR:PORT, e.g. h1=10.0.1.1:32768")
    return host, (addr, port(port_s))


def switch_port(text: str) -> tuple[str, int]:
    """SWITCH:PORT -> (switch, port)."""
    sw, sep, p = text.rpartition(":")
    if not sep or not sw:
        raise argparse.ArgumentTypeError(f"{text!r}: expected SWITCH:PORT, e.g. s1:7")
    try:
        v = int(p)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: port {p!r} is not a number") from None
    if not 0 <= v < 511:
        raise argparse.ArgumentTypeError(f"{text!r}: port {v} is outside 0..510")
    return sw, v


def bitmap16(text: str) -> int:
    try:
        v = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number (e.g. 0x9400)") from None
    if not 0 < v <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"0x{v:x} is not a 16-bit instruction bitmap")
    return v
