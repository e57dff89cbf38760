"""argparse ``type=`` checkers: a bad value is refused at the edge, naming the value and
the range it must be in.

Why one module: every command line of the project (controller, host agent, test bed,
collector, workloads) takes ports, positive durations, bounded integers and
addresses; one checker of each keeps their messages and limits the same.
"""
from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Callable

__all__ = ["bitmap16", "bounded_float", "bounded_int", "election_id", "host_port",
           "ipv4_or_int", "port", "positive", "switch_port"]


def _number(text: str, kind: Callable[[str], int | float], what: str) -> int | float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} {text!r} is not a number") from None


def port(text: str) -> int:
    """A UDP/TCP port, 0..65535 (0: none, or the kernel's choice)."""
    v = int(_number(text, int, "port"))
    if not 0 <= v <= 0xFFFF:
        raise argparse.ArgumentTypeError(f"port {v} is outside 0..65535")
    return v


def positive(text: str) -> float:
    """A number > 0 (seconds, rates, ...)."""
    v = float(_number(text, float, "value"))
    if not v > 0:
        raise argparse.ArgumentTypeError(f"{v} must be > 0")
    return v


def bounded_float(low: float, high: float, *, what: str = "value",
                  low_open: bool = True) -> Callable[[str], float]:
    """A checker for a number in (low, high] (or [low, high] with ``low_open=False``)."""
    def check(text: str) -> float:
        v = float(_number(text, float, what))
        ok = (low < v if low_open else low <= v) and v <= high
        if not ok:
            lo = f"({low:g}" if low_open else f"[{low:g}"
            raise argparse.ArgumentTypeError(f"{what} {v:g} is outside {lo}, {high:g}]")
        return v
    check.__name__ = what.replace(" ", "_")
    return check


def bounded_int(low: int, high: int, *, what: str = "value") -> Callable[[str], int]:
    """A checker for an integer (decimal or 0x...) in low..high."""
    def check(text: str) -> int:
        v = int(_number(text, lambda t: int(t, 0), what))
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"{what} {v} is outside {low}..{high}")
        return v
    check.__name__ = what.replace(" ", "_")
    return check


election_id = bounded_int(1, (1 << 128) - 1, what="election id")
"""A P4Runtime election id, 1..2^128-1 (0 is not a valid id)."""

bitmap16 = bounded_int(1, 0xFFFF, what="16-bit instruction bitmap")
"""A non-zero 16-bit INT instruction bitmap, e.g. 0x9400."""


def ipv4_or_int(text: str) -> int:
    """A 32-bit id given as an integer or a dotted IPv4 address."""
    try:
        return int(ipaddress.IPv4Address(text))
    except ValueError:
        pass
    return bounded_int(0, 0xFFFFFFFF, what="32-bit id (integer or IPv4)")(text)


def host_port(default_port: int) -> Callable[[str], tuple[str, int]]:
    """A checker for ``IP[:PORT]`` (PORT 1..65535, ``default_port`` when left out)."""
    def check(text: str) -> tuple[str, int]:
        host, sep, port_s = text.rpartition(":")
        if not sep or not host:
            host, port_s = text, str(default_port)
        try:
            ipaddress.ip_address(host)
            p = int(port_s)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r}: expected IPv4:PORT, e.g. 10.0.0.100:{default_port}") from None
        if not 1 <= p <= 0xFFFF:
            raise argparse.ArgumentTypeError(f"{text!r}: port {p} is outside 1..65535")
        return host, p
    return check


def switch_port(port_limit: int) -> Callable[[str], tuple[str, int]]:
    """A checker for ``SWITCH:PORT`` -> (switch, port), PORT in 0..port_limit-1.  The
    caller passes the bound its switches' architecture sets (v1model: its drop port),
    so this module knows no architecture."""
    def check(text: str) -> tuple[str, int]:
        sw, sep, p = text.rpartition(":")
        if not sep or not sw:
            raise argparse.ArgumentTypeError(f"{text!r}: expected SWITCH:PORT, e.g. s1:7")
        try:
            v = int(p)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: port {p!r} is not a number") from None
        if not 0 <= v < port_limit:
            raise argparse.ArgumentTypeError(f"{text!r}: port {v} is outside 0..{port_limit - 1}")
        return sw, v
    return check
