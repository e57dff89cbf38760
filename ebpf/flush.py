"""Run the sink's flush program (``int_sink_flush``) on chosen flows: BPF_PROG_TEST_RUN.

The agent picks the flows whose run has been idle from a batch read of the flow
table; the kernel program swaps each run out atomically and records it in the ring,
so the choice in user space may be stale without losing or doubling a packet.
Input: ``struct int_flush_hdr`` then up to ``FLUSH_MAX_KEYS`` ``struct int_flow_key``.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from .errors import EbpfError
from .records import FLOW_KEY_DTYPE

__all__ = ["FLUSH_MAGIC", "FLUSH_MAX_KEYS", "flush_runs"]

FLUSH_MAGIC = 0x464C5553
FLUSH_MAX_KEYS = 64
FLUSH_RING_FULL = 0x10000
_HDR = struct.Struct("<IIQ")


class _TestRunOpts(ctypes.Structure):
    """libbpf's ``struct bpf_test_run_opts``."""

    _fields_ = [("sz", ctypes.c_size_t), ("data_in", ctypes.c_void_p),
                ("data_out", ctypes.c_void_p), ("data_size_in", ctypes.c_uint32),
                ("data_size_out", ctypes.c_uint32), ("ctx_in", ctypes.c_void_p),
                ("ctx_out", ctypes.c_void_p), ("ctx_size_in", ctypes.c_uint32),
                ("ctx_size_out", ctypes.c_uint32), ("retval", ctypes.c_uint32),
                ("repeat", ctypes.c_int), ("duration", ctypes.c_uint32),
                ("flags", ctypes.c_uint32), ("cpu", ctypes.c_uint32),
                ("batch_size", ctypes.c_uint32)]


def _test_run(prog_fd: int, data: bytes) -> int:
    from bcc.libbcc import lib  # the libbpf inside bcc

    fn = lib.bpf_prog_test_run_opts
    fn.argtypes = [ctypes.c_int, ctypes.POINTER(_TestRunOpts)]
    fn.restype = ctypes.c_int
    buf = ctypes.create_string_buffer(data, len(data))
    opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts), data_in=ctypes.addressof(buf),
                        data_size_in=len(data), repeat=1)
    rc = fn(prog_fd, ctypes.byref(opts))
    if rc != 0:
        raise EbpfError(f"int_sink_flush: BPF_PROG_TEST_RUN failed ({rc})")
    return ctypes.c_int32(opts.retval).value


def flush_runs(prog_fd: int, keys: np.ndarray) -> int:
    """Record the open runs of ``keys`` (FLOW_KEY_DTYPE); returns runs recorded (a full
    ring stops a call early: those runs stay open for the next one)."""
    # a fresh zeroed array, filled field by field: numpy copies of a structured array
    # leave its padding bytes as they were in memory, and the kernel looks the key up
    # byte for byte (its keys are zero-padded)
    clean = np.zeros(keys.size, FLOW_KEY_DTYPE)
    for name in FLOW_KEY_DTYPE.names or ():
        clean[name] = keys[name]
    keys = clean
    done = 0
    for i in range(0, keys.size, FLUSH_MAX_KEYS):
        part = keys[i:i + FLUSH_MAX_KEYS]
        got = _test_run(prog_fd, _HDR.pack(FLUSH_MAGIC, part.size, 0) + part.tobytes())
        if got < 0:
            raise EbpfError("int_sink_flush: the program refused its input")
        done += got & 0xFFFF
        if got & FLUSH_RING_FULL:
            break  # the rest stays open for the next call
    return done
