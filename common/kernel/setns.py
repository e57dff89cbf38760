"""Enter a named network namespace from the calling thread, for netlink sockets.

The eBPF programs are loaded in the calling process (BPF objects are not tied to a
namespace), but the tc attachment is made over a netlink socket, which belongs to the
namespace it was created in.  Creating that socket inside ``in_netns`` lets one process
attach programs in several namespaces without helper processes (file descriptors of
loaded programs stay valid, unlike with a forked netlink helper).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from collections.abc import Iterator

from common.kernel.errors import AttachError

__all__ = ["in_netns"]

_CLONE_NEWNET = 0x40000000
_NETNS_DIR = "/var/run/netns"


def _setns(fd: int, what: str) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise AttachError(f"setns into {what} failed: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Run the block in network namespace ``name`` (None: stay where we are)."""
    if name is None:
        yield
        return
    path = os.path.join(_NETNS_DIR, name)
    try:
        target = open(path, "rb")  # noqa: SIM115 - closed by the with below
    except OSError as exc:
        raise AttachError(f"network namespace {name!r} not found ({path}: {exc.strerror})") \
            from None
    with open("/proc/thread-self/ns/net", "rb") as home, target:
        _setns(target.fileno(), f"namespace {name!r}")
        try:
            yield
        finally:
            _setns(home.fileno(), "the original namespace")
