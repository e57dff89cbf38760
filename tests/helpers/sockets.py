"""Receiving from real sockets in tests: what arrived within a time limit."""
from __future__ import annotations

import select
import socket
import time


def recv_datagrams(sock: socket.socket, n: int, timeout_s: float) -> list[bytes]:
    """Up to ``n`` datagrams (or raw packets) from ``sock``, fewer when ``timeout_s``
    passes first: the test asserts on what came, so a missing packet shows as such."""
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(out) < n:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            break
        out.append(sock.recv(65535))
    return out
