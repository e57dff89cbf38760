"""Check that this machine can load the project's eBPF programs; one clear message if not.

bcc compiles C at run time, so it needs: root (or CAP_BPF + CAP_NET_ADMIN), the bcc
Python bindings (Debian/Ubuntu: python3-bpfcc), and kernel headers for the running
kernel under /lib/modules/<release>/build (Debian: linux-headers-<release>, or a link
to the closest installed headers), or the kernel's built-in kheaders.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from pathlib import Path

from .errors import EbpfSetupError

__all__ = ["check_setup", "missing_requirements"]


def _kernel_version(release: str) -> tuple[int, int] | None:
    parts = release.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return None


def missing_requirements() -> list[str]:
    """What is missing, one line each (empty when all is there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root: loading eBPF programs and attaching tc filters needs root")
    if importlib.util.find_spec("bcc") is None:
        missing.append("bcc Python bindings: install python3-bpfcc (Debian/Ubuntu) and run "
                       "with a Python that sees system packages")
    release = platform.release()
    build = Path("/lib/modules") / release / "build"
    kheaders = Path("/sys/kernel/kheaders.tar.xz")
    if not (build / "include").is_dir() and not kheaders.exists():
        missing.append(f"kernel headers for {release}: install linux-headers-{release} "
                       f"(or link {build} to installed headers, or load the kheaders module)")
    version = _kernel_version(release)
    if version is not None and version < (5, 8):
        missing.append(f"kernel >= 5.8 for BPF ring buffers (this is {release}); the XDP "
                       "sink needs >= 5.18")
    if not Path("/sys/fs/bpf").exists() and not Path("/proc/sys/net/core/bpf_jit_enable").exists():
        missing.append("kernel eBPF support: /proc/sys/net/core/bpf_jit_enable is absent")
    return missing


def check_setup() -> None:
    """Raise ``EbpfSetupError`` naming everything that is missing."""
    missing = missing_requirements()
    if missing:
        raise EbpfSetupError("cannot load eBPF programs on this machine; missing:\n  - "
                             + "\n  - ".join(missing))


def main() -> int:
    """``python -m ebpf.setup_check``: say whether this machine can run the programs."""
    import sys
    missing = missing_requirements()
    if missing:
        print("ebpf setup: missing:\n  - " + "\n  - ".join(missing), file=sys.stderr)
        return 1
    print(f"ebpf setup: ok (kernel {platform.release()}, bcc and headers found)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
