"""The kernel helpers' error: raised where a program, filter or namespace cannot be
reached, attached or removed.

Its own module because the host side (``ebpf``) and the switch's eBPF target
(``softswitch.backends.ebpf``) both attach through :mod:`common.kernel.tc` and
:mod:`common.kernel.setns` and catch this one class.
"""

from __future__ import annotations

__all__ = ["AttachError"]


class AttachError(RuntimeError):
    """A program could not be compiled, loaded, attached or detached (names iface/netns)."""
