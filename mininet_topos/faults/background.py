"""Background traffic out of one router port: ``python -m mininet_topos.faults.background
--iface s1-eth3 --rate-mbps 95`` (run inside the router's namespace).

Why raw frames: the congestion fault must load exactly one link direction; frames sent
on an AF_PACKET socket leave through the port's qdisc (so they queue with the
collective's traffic) and carry an IPv4/UDP packet to an address nobody routes
(198.18.0.1, the benchmarking range), which the far router drops after counting it.
Paced in 1 ms slices; stops on SIGTERM.
"""
from __future__ import annotations

import argparse
import signal
import socket
import struct
import time

FRAME = 1400
UDP_PORT = 9     # discard: the switch-side filters of the eBPF target match it (inject.py)


def _frame(src_mac: bytes) -> bytes:
    payload = bytes(FRAME - 14 - 20 - 8)
    udp = struct.pack("!HHHH", UDP_PORT, UDP_PORT, 8 + len(payload), 0)
    total = 20 + len(udp) + len(payload)
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, 0, 0x4000, 64, 17, 0,
                     socket.inet_aton("198.18.0.2"), socket.inet_aton("198.18.0.1"))
    s = sum(struct.unpack("!10H", ip))
    s = (s & 0xFFFF) + (s >> 16)
    ip = ip[:10] + struct.pack("!H", ~s & 0xFFFF) + ip[12:]
    return b"\xff" * 6 + src_mac + b"\x08\x00" + ip + udp + payload


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m mininet_topos.faults.background")
    ap.add_argument("--iface", required=True)
    ap.add_argument("--rate-mbps", type=float, required=True)
    ap.add_argument("--start-at", type=float, default=0.0, metavar="UNIX_TIME",
                    help="start sending at this wall-clock time (started early: a Python "
                         "process takes seconds to come up on a busy machine)")
    args = ap.parse_args(argv)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    sock.bind((args.iface, 0))
    frame = _frame(sock.getsockname()[4][:6].ljust(6, b"\0"))
    per_s = args.rate_mbps * 1e6 / 8 / len(frame)
    while not stop[0] and time.time() < args.start_at:
        time.sleep(min(0.01, max(0.0, args.start_at - time.time())))
    t0, sent = time.monotonic(), 0
    while not stop[0]:
        due = int((time.monotonic() - t0) * per_s)
        while sent < due and not stop[0]:
            try:
                sock.send(frame)
            except OSError:   # queue full (ENOBUFS): the frame is dropped, like a switch would
                pass
            sent += 1
        time.sleep(0.001)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
