"""The one interface a switch target implements.

A target takes a checked program for an architecture and runs it somewhere: the
Python target in this process (generated Python through the v1model pipeline), the
eBPF target in the kernel (generated C at tc or XDP). Everything above the targets
(the Python API, the command lines, the P4Runtime daemon, the test bed) asks the
registry (``softswitch.targets``) for a `Target` by name and never branches on the
name itself; adding a third target is a folder under ``softswitch/targets/`` with a
`Target` subclass, plus one entry in the registry. This is the split p4c's eBPF
back end makes with its ``Target`` class, and behavioral-model between bm_sim and
simple_switch. As bm_sim's run-time objects are shared by its targets, a program's
tables, externs, digests, value sets and P4Info come from ``softswitch.objects``
(`build_objects` on the lowered form), never from another target's back end.
"""
from __future__ import annotations

import abc
from typing import Any

from softswitch.architecture import Architecture


class Target(abc.ABC):
    """A place a compiled program runs; one instance per target in the registry."""

    name: str = ""
    summary: str = ""                       # one line for --target's help
    hooks: tuple[str, ...] = ()             # kernel hooks it can run at (first: the default)
    dumps_source: str | None = None         # the generated language --dump-c writes, if any

    @abc.abstractmethod
    def build(self, checked: Any, arch: Architecture, **kw: Any) -> Any:
        """A switch running `checked` (a `CheckedProgram`) for `arch`: an object with
        ``runtime`` (the control-plane API), ``program``, ``process``,
        ``process_packet`` and ``close`` (also a context manager). Keywords are the
        switch's (``name``; ``clock_us`` on the Python target; ``hook`` and ``dump_c``
        on a kernel target); a target drops those that mean nothing to it and refuses a
        kernel hook it cannot run at with a `CompileError` naming the target that can."""

    @abc.abstractmethod
    def daemon(self, opts: Any) -> Any:
        """The switch process for `opts` (a ``softswitch.switchd.options.SwitchOptions``):
        ``start``, ``run``, ``close``, ``stop_event``."""


def kernel_targets() -> list[str]:
    """The registered targets that run at a kernel hook (for messages)."""
    from softswitch.targets import TARGETS
    return [t.name for t in TARGETS.values() if t.hooks]
