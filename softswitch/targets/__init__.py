"""The switch targets and their registry: where a compiled program runs.

    from softswitch.targets import build, target_named
    sw = build(checked, V1MODEL, target="ebpf", hook="xdp")

Each target lives in its own folder (``python/``, ``ebpf/``) with a `Target`
subclass (``base.py``); this registry is the one place that lists them, and the
command lines (``--target``), `Switch.from_file`, the switch daemon and the test bed
read their choices from it.
"""
from __future__ import annotations

from typing import Any

from softswitch.architecture import Architecture
from softswitch.errors import CompileError
from softswitch.targets.base import Target
from softswitch.targets.ebpf import EbpfTarget
from softswitch.targets.python import PythonTarget

TARGETS: dict[str, Target] = {t.name: t for t in (PythonTarget(), EbpfTarget())}
DEFAULT_TARGET = "python"

__all__ = ["DEFAULT_TARGET", "TARGETS", "Target", "build", "target_named"]


def target_named(name: str) -> Target:
    """The registered target `name`; a `CompileError` listing the others otherwise."""
    found = TARGETS.get(name)
    if found is None:
        raise CompileError(f"unknown target {name!r} (have: {', '.join(TARGETS)})")
    return found


def build(checked: Any, arch: Architecture, *, target: str = DEFAULT_TARGET, **kw: Any) -> Any:
    """A switch running `checked` for `arch` on the registered target `target`."""
    return target_named(target).build(checked, arch, **kw)
