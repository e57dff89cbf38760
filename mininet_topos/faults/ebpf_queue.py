"""A running eBPF switch's virtual queue, changed from outside its process.

Why: softswitch's eBPF target keeps each port's queue (the one INT measures and whose
tail drops its statistics count) in a BPF map, ``p4_queues`` (``softswitch.backends.
ebpf.queues``), and only the switch process holds it by name.  The map is a kernel
object, though: the program on the port's tc ingress names it by id, so the fault
harness opens it by id and changes one port's depth (a tiny queue) the way the switch's
own ``set_queue`` does.  The packets then drop inside the program, before the link's
sequence numbers, and count as the port's tail drops, as on any switch.
"""
from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

from mininet_topos.faults.spec import FaultError

__all__ = ["QUEUE_MAP", "VirtualQueue", "queue_map_id"]

QUEUE_MAP = "p4_queues"
_BPF_MAP_LOOKUP_ELEM, _BPF_MAP_UPDATE_ELEM = 1, 2
_BPF_F_LOCK = 4          # copy the value under its bpf_spin_lock (the program's lock)
_VALUE = 64              # struct p4_queue: lock u32, depth u32, then seven u64
_DEPTH_AT, _DROPS_AT = 4, 48


class _ElemAttr(ctypes.Structure):
    """``union bpf_attr``'s map element member."""

    _fields_ = [("map_fd", ctypes.c_uint32), ("pad", ctypes.c_uint32), ("key", ctypes.c_uint64),
                ("value", ctypes.c_uint64), ("flags", ctypes.c_uint64)]


def _bpf(cmd: int, attr: ctypes.Structure, what: str) -> int:
    from softswitch.backends.ebpf import kernel as K

    r = K._libc.syscall(K._NR_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if r < 0:
        raise FaultError(f"{what}: {os.strerror(ctypes.get_errno())}")
    return int(r)


def _fd_by_id(cmd: int, obj_id: int, what: str) -> int:
    from softswitch.backends.ebpf import kernel as K

    return _bpf(cmd, K._GetIdAttr(id=obj_id), f"{what} {obj_id}")


def _map_name(fd: int) -> str:
    from softswitch.backends.ebpf import kernel as K

    info = (ctypes.c_uint8 * 96)()     # bpf_map_info: name[16] at byte 24
    attr = K._InfoAttr(bpf_fd=fd, info_len=ctypes.sizeof(info), info=ctypes.addressof(info))
    _bpf(K.BPF_OBJ_GET_INFO_BY_FD, attr, "map info")
    return bytes(info[24:40]).split(b"\0", 1)[0].decode("ascii", "replace")


def queue_map_id(prog_ids: list[int]) -> int:
    """The id of the ``p4_queues`` map the programs ``prog_ids`` use (the ids on a port's
    tc ingress, ``mininet_topos.ebpf_switch.attached_programs``)."""
    from softswitch.backends.ebpf import kernel as K

    for pid in prog_ids:
        fd = _fd_by_id(K.BPF_PROG_GET_FD_BY_ID, pid, "program")
        try:
            map_ids = K.program_map_ids(fd)
        finally:
            os.close(fd)
        for mid in map_ids:
            mfd = _fd_by_id(K.BPF_MAP_GET_FD_BY_ID, mid, "map")
            try:
                if _map_name(mfd) == QUEUE_MAP:
                    return mid
            finally:
                os.close(mfd)
    raise FaultError(f"no {QUEUE_MAP} map behind programs {prog_ids}: not an eBPF switch?")


@dataclass(slots=True)
class VirtualQueue:
    """One port's entry of a switch's ``p4_queues`` map (opened by map id)."""

    map_id: int
    port: int

    def _value(self, value: ctypes.Array | None = None) -> ctypes.Array:
        from softswitch.backends.ebpf import kernel as K

        fd = _fd_by_id(K.BPF_MAP_GET_FD_BY_ID, self.map_id, "map")
        try:
            key = ctypes.c_int(self.port)
            buf = value if value is not None else (ctypes.c_uint8 * _VALUE)()
            attr = _ElemAttr(map_fd=fd, key=ctypes.addressof(key), value=ctypes.addressof(buf),
                             flags=_BPF_F_LOCK)
            cmd = _BPF_MAP_UPDATE_ELEM if value is not None else _BPF_MAP_LOOKUP_ELEM
            _bpf(cmd, attr, f"{QUEUE_MAP} port {self.port}")
            return buf
        finally:
            os.close(fd)

    @property
    def depth(self) -> int:
        return ctypes.c_uint32.from_buffer(self._value(), _DEPTH_AT).value

    @property
    def tail_drops(self) -> int:
        return ctypes.c_uint64.from_buffer(self._value(), _DROPS_AT).value

    def set_depth(self, depth: int) -> None:
        """The packets that may wait at the port from now on (the rest of the entry as
        the program last left it: a packet counted between the read and the write is
        lost from the counters, not from the queue; 0 only to put back a depth as read)."""
        if not 0 <= depth < 1 << 19:
            raise FaultError(f"queue depth {depth} outside 0..{(1 << 19) - 1}")
        buf = self._value()
        ctypes.c_uint32.from_buffer(buf, _DEPTH_AT).value = depth
        self._value(buf)
