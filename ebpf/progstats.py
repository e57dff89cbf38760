"""Per-program run time from the kernel (kernel.bpf_stats_enabled, bpf_prog_info).

With the sysctl on, the kernel adds each run's duration to the program's run_time_ns
and counts runs in run_cnt; both are read with BPF_OBJ_GET_INFO_BY_FD.  This is how
the sink's per-packet cost is measured with real packets (bench/bench_ebpf.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import struct
from collections.abc import Iterator
from pathlib import Path

from .errors import EbpfError

__all__ = ["bpf_stats_enabled", "prog_run_stats"]

_SYSCTL = Path("/proc/sys/kernel/bpf_stats_enabled")
_INFO_LEN = 232                 # sizeof(struct bpf_prog_info), linux/bpf.h of 6.x
_RUN_TIME_OFF, _RUN_CNT_OFF = 192, 200


def prog_run_stats(prog_fd: int) -> tuple[int, int]:
    """(run_time_ns, run_cnt) of the program behind ``prog_fd``."""
    from bcc.libbcc import lib  # late: only where bcc is installed

    buf = ctypes.create_string_buffer(_INFO_LEN)
    size = ctypes.c_uint32(_INFO_LEN)
    if lib.bpf_obj_get_info(prog_fd, buf, ctypes.byref(size)) != 0:
        raise EbpfError(f"bpf_obj_get_info on program fd {prog_fd} failed")
    if size.value < _RUN_CNT_OFF + 8:
        raise EbpfError(f"kernel bpf_prog_info of {size.value} B has no run_time_ns/run_cnt")
    return struct.unpack_from("<QQ", buf.raw, _RUN_TIME_OFF)


@contextlib.contextmanager
def bpf_stats_enabled() -> Iterator[None]:
    """Turn kernel.bpf_stats_enabled on for the block, then restore the old value."""
    try:
        old = _SYSCTL.read_text().strip()
        _SYSCTL.write_text("1\n")
    except OSError as exc:
        raise EbpfError(f"cannot enable {_SYSCTL}: {exc.strerror}") from None
    try:
        yield
    finally:
        _SYSCTL.write_text(old + "\n")
