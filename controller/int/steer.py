"""Steer Telemetry Reports to collector processes by flow: a classic BPF program on a
SO_REUSEPORT group (SO_ATTACH_REUSEPORT_CBPF).

Several sockets bound to one port with SO_REUSEPORT form a group; by default the
kernel picks a socket by the datagram's source address and port, i.e. by reporting
switch, so one busy sink switch lands on one process.  The program attached here
picks by the *inner* flow instead: the kernel runs it with the UDP payload (the
report) at offset 0 and uses its return value as the index of the socket in the
group (bind order).  It hashes the inner IPv4 source and destination and the inner
UDP source port, found behind the group header and the ``md_len`` words of sink
metadata (byte 10 of the report), assuming a 20-byte inner IPv4 header:

    A = report[10]; X = 20 + 4 * A          # offset of the inner IPv4 header
    h = ip.src ^ ip.dst ^ udp.sport  (+ mixing)   ->  return h % n

Every report of a flow carries the same bytes there (same sink, same addresses,
same port), so each flow's state lives in one process.  A datagram too short for
the loads makes the program return 0 (the first socket, which counts it as
malformed as any collector would).  Host-agent batches are not steered: an agent's
datagram holds many flows, but all from one receiving host, so the default
source-address choice already keeps each of those flows in one process.
"""
from __future__ import annotations

import ctypes
import socket

__all__ = ["SO_ATTACH_REUSEPORT_CBPF", "attach_flow_steering", "flow_index", "flow_program"]

SO_ATTACH_REUSEPORT_CBPF = 51

# classic BPF opcodes (linux/filter.h)
_LD_B_ABS, _LD_W_IND, _LD_H_IND, _TAX = 0x30, 0x40, 0x48, 0x07
_ALU_LSH_K, _ALU_RSH_K, _ALU_MUL_K, _ALU_MOD_K, _ALU_XOR_X = 0x64, 0x74, 0x24, 0x94, 0xAC
_ST, _LDX_MEM, _RET_A = 0x02, 0x61, 0x16


class _SockFilter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8),
                ("k", ctypes.c_uint32)]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_uint16), ("filter", ctypes.POINTER(_SockFilter))]


def flow_program(n: int) -> list[tuple[int, int, int, int]]:
    """The program as (code, jt, jf, k) instructions, for a group of ``n`` sockets."""
    if not 1 <= n <= 1024:
        raise ValueError(f"flow steering over {n} sockets: expected 1..1024")
    return [
        (_LD_B_ABS, 0, 0, 10),        # A = md_len (words of sink metadata)
        (_ALU_LSH_K, 0, 0, 2),        # A *= 4
        (_TAX, 0, 0, 0),              # X = A: inner IPv4 header at X + 20
        (_LD_W_IND, 0, 0, 20 + 12),   # A = inner source address
        (_ST, 0, 0, 0),               # M[0] = A
        (_LD_W_IND, 0, 0, 20 + 16),   # A = inner destination address
        (_ST, 0, 0, 1),               # M[1] = dst
        (_LD_H_IND, 0, 0, 20 + 20),   # A = inner UDP source port (IHL 5)
        (_LDX_MEM, 0, 0, 0),          # X = M[0] (src)
        (_ALU_XOR_X, 0, 0, 0),        # A ^= src
        (_LDX_MEM, 0, 0, 1),          # X = M[1] (dst)
        (_ALU_XOR_X, 0, 0, 0),        # A ^= dst
        (_ALU_MUL_K, 0, 0, 0x9E3779B1),   # mix (Fibonacci hashing)
        (_ALU_RSH_K, 0, 0, 16),
        (_ALU_MOD_K, 0, 0, n),
        (_RET_A, 0, 0, 0),
    ]


def attach_flow_steering(sock: socket.socket, n: int) -> None:
    """Attach the program to the reuseport group of ``sock`` (one socket of the group
    is enough; the last attach wins).  Raises OSError where the kernel refuses it."""
    prog = flow_program(n)
    arr = (_SockFilter * len(prog))(*[_SockFilter(c, jt, jf, k) for c, jt, jf, k in prog])
    fprog = _SockFprog(len(prog), ctypes.cast(arr, ctypes.POINTER(_SockFilter)))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, bytes(fprog))


def flow_index(report: bytes, n: int) -> int:
    """What the program returns for ``report`` (tests compare the kernel's choice)."""
    if len(report) < 11 or len(report) < report[10] * 4 + 42:
        return 0
    md = report[10] * 4
    src = int.from_bytes(report[md + 32:md + 36], "big")
    dst = int.from_bytes(report[md + 36:md + 40], "big")
    sport = int.from_bytes(report[md + 40:md + 42], "big")
    a = (sport ^ src ^ dst) * 0x9E3779B1 & 0xFFFFFFFF
    return (a >> 16) % n
