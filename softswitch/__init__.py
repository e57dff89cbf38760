"""softswitch: a P4_16 v1model software switch that runs P4 source directly.

Layers: ``frontend`` (parse + check) -> ``compiler`` (generated Python per block)
-> ``v1model`` (BMv2 simple_switch pipeline rules) -> ``runtime`` (control-plane
API, no transport). ``api.Switch`` ties them together.
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
