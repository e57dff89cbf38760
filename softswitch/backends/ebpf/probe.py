"""Kernel features the eBPF target needs, probed once with a message that says what to do."""
from __future__ import annotations

import os

from softswitch.backends.ebpf.errors import EbpfKernelError


def check_kernel() -> None:
    """Raise EbpfKernelError naming what is missing (bcc, root, kernel too old)."""
    try:
        import bcc  # noqa: F401
    except ImportError:
        raise EbpfKernelError("--target ebpf needs bcc's Python module (Debian: python3-bpfcc) "
                              "and a virtual environment with --system-site-packages") from None
    if os.geteuid() != 0:
        raise EbpfKernelError("--target ebpf loads kernel programs: run as root")
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) < (5, 10):
        raise EbpfKernelError(f"--target ebpf needs Linux 5.10 or later (bounded loops, "
                              f"BPF_PROG_TEST_RUN of tc programs); this is {os.uname().release}")
