"""softswitch: a P4_16 v1model software switch that runs P4 source directly.

Layers (BACKEND.md): core (``frontend``, ``lowering``, the ``architecture`` contract,
run-time objects) -> architecture (``v1model``) -> back ends (``backends/python``,
``backends/ebpf``) -> ``runtime`` (control-plane API) -> ``targets`` (the registry;
``targets/python``, ``targets/ebpf``: each target's switch and switch process).
``Switch`` (the Python target's, ``Switch.from_file(..., target=NAME)`` for any) is
the entry point.
"""
from __future__ import annotations

from typing import Any

__all__ = ["Switch"]


def __getattr__(name: str) -> Any:
    # lazy, so importing softswitch.frontend alone stays light
    if name == "Switch":
        from softswitch.targets.python.switch import Switch
        return Switch
    raise AttributeError(name)
