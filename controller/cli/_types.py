"""argparse `type=` checkers of the controller's own options (the generic ones are in
:mod:`common.argtypes`): bad values are rejected at the edge with a clear message."""
from __future__ import annotations

import argparse

from common.argtypes import port


def agent(text: str) -> tuple[str, tuple[str, int]]:
    """HOST=ADDR:PORT -> (host, (addr, port))."""
    host, sep, rest = text.partition("=")
    addr, sep2, port_s = rest.rpartition(":")
    if not sep or not sep2 or not host or not addr:
        raise argparse.ArgumentTypeError(f"--agent {text!r}: expected HOST=ADDR:PORT, e.g. h1=10.0.1.1:32768")
    return host, (addr, port(port_s))

