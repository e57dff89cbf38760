"""The ebpf package's one exception hierarchy.

Attaching (tc, XDP, entering a namespace) raises ``common.kernel.errors.AttachError``,
shared with the switch's eBPF target; it is not an ``EbpfError``.
"""

from __future__ import annotations

__all__ = ["AgentError", "ConfigError", "EbpfError", "EbpfSetupError"]


class EbpfError(RuntimeError):
    """Base of every error raised by the ebpf package."""


class EbpfSetupError(EbpfError):
    """bcc, kernel headers, root or a kernel feature is missing; the message says which."""


class ConfigError(EbpfError, ValueError):
    """A parameter out of range; the message names the parameter, value and range."""


class AgentError(EbpfError):
    """The host agent could not start or talk to its peers."""
