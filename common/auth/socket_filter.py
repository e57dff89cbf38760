"""Kernel socket filters that drop forged datagrams before they reach Python.

A flood of forged datagrams (the ``rogue`` preset: thousands per second) costs the
receiver a wake-up, a copy and an HMAC or a set look-up each in Python; on a loaded
machine that thread falls behind and the kernel then drops *genuine* datagrams at the
full socket.  ``SourceFilter`` attaches an eBPF socket filter (``socket_filter.c``,
SO_ATTACH_BPF) that admits only the configured sources and, for agent/controller
channels, only datagrams that look like ``formats.auth`` frames of the expected kind.
What the kernel drops is counted by reason in a BPF map, under the same reason names
the Python checks use (``report_source``, ``unauthenticated``, ``short``,
``bad_version``, ``bad_kind``, and ``unknown_source`` for a frame from an address that
may not send it, e.g. feedback from anyone but the controller), so "every rejection counted by reason" still holds.  The Python
checks stay: the filter only makes the common forgeries cheap, the MAC is still checked
on what it lets through.

Needs bcc and CAP_BPF/root; ``SourceFilter.try_attach`` says why it could not attach
and returns None, leaving the Python checks alone in charge.
"""
from __future__ import annotations

import ipaddress
import logging
import os
import socket
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["SourceFilter"]

log = logging.getLogger("common.auth")

SO_ATTACH_BPF = getattr(socket, "SO_ATTACH_BPF", 50)
SO_DETACH_BPF = getattr(socket, "SO_DETACH_BPF", 27)
_SOURCE = Path(__file__).resolve().parent / "socket_filter.c"
# index in the C program's `drops` array -> counter name
_REASONS = ("source", "short", "unauthenticated", "bad_version", "bad_kind")


def _key(addr: str, port: int) -> int:
    """The C program's key: raw IPv4 source | raw port << 32 (both in wire order)."""
    a = int.from_bytes(ipaddress.IPv4Address(addr).packed, "little")
    p = int.from_bytes(struct.pack("!H", port), "little")
    return a | (p << 32)


class SourceFilter:
    """One compiled filter; attach it to one or more sockets, read its drops."""

    def __init__(self, *, sources: Iterable[tuple[str, int]] | None,
                 frame_kind: int | None, source_reason: str = "report_source") -> None:
        """``sources``: (IPv4 address, UDP source port; 0 = any port) pairs that may
        send, None: any source.  ``frame_kind``: the ``formats.auth`` kind the socket
        takes, None: payloads are not frames.  ``source_reason``: counter name of a
        datagram from another source."""
        from bcc import BPF  # late: callers without bcc use try_attach

        srcs = None if sources is None else frozenset(sources)
        cflags = [f"-DCHECK_FRAME={int(frame_kind is not None)}",
                  f"-DFRAME_KIND={int(frame_kind or 0)}",
                  f"-DANY_SOURCE={int(srcs is None)}"]
        self._bpf: Any = BPF(src_file=os.fsencode(_SOURCE), cflags=cflags)
        self._fn = self._bpf.load_func(b"source_filter", BPF.SOCKET_FILTER)
        allowed = self._bpf[b"allowed"]
        for addr, port in srcs or ():
            allowed[allowed.Key(_key(addr, port))] = allowed.Leaf(1)
        self._drops = self._bpf[b"drops"]
        self._names = (source_reason,) + _REASONS[1:]

    @classmethod
    def try_attach(cls, socks: Iterable[socket.socket | None], *,
                   sources: Iterable[tuple[str, int]] | None, frame_kind: int | None,
                   source_reason: str = "report_source", what: str = "socket"
                   ) -> SourceFilter | None:
        """Compile and attach to every socket given, or log why not and return None."""
        try:
            f = cls(sources=sources, frame_kind=frame_kind, source_reason=source_reason)
            for s in socks:
                if s is not None:
                    f.attach(s)
        except ImportError:
            log.warning("%s: no kernel source filter (bcc is not installed): forged "
                        "datagrams are checked in Python only", what)
            return None
        except Exception as exc:  # noqa: BLE001 - bcc raises plain Exception on load failures
            log.warning("%s: no kernel source filter (%s): forged datagrams are checked "
                        "in Python only", what, exc)
            return None
        return f

    def attach(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_BPF, self._fn.fd)

    def drops(self) -> dict[str, int]:
        """Datagrams dropped in the kernel so far, by reason (only non-zero ones)."""
        out = {}
        for i, name in enumerate(self._names):
            n = int(self._drops[self._drops.Key(i)].value)
            if n:
                out[name] = n
        return out

    def close(self) -> None:
        """Free the program and maps (sockets keep their reference until closed)."""
        self._bpf.cleanup()
