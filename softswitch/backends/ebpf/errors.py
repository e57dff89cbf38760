"""Errors of the eBPF back end: what it cannot express, and what the kernel refused."""
from __future__ import annotations

from typing import Any

from softswitch.errors import CompileError, SoftswitchError


class EbpfUnsupported(CompileError):
    """A construct of a valid program that the eBPF back end cannot express (yet).

    The message starts with the construct's ``file:line:col`` so the CLI prints it as
    ``file:line:col: error: ...``; the Python target runs the program unchanged."""

    def __init__(self, node: Any, what: str) -> None:
        loc = getattr(node, "loc", None)
        where = f"{loc}: " if loc is not None and getattr(loc, "line", None) else ""
        super().__init__(f"{where}unsupported on --target ebpf: {what}")


class EbpfKernelError(SoftswitchError):
    """bcc/clang could not compile the generated C, the verifier refused it, or a
    map/attach/test-run system call failed."""
