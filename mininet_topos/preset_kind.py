"""Which runner takes a preset file: the ``kind:`` it declares, read before loading it.

Why its own module: the experiment runner's presets and the fault experiments' presets
(``mininet_topos.experiment`` and ``mininet_topos.faults``, which import each other's
parts one way only) both ask it, so it sits below both.
"""
from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["spec_kind"]


def spec_kind(path: Path) -> str | None:
    """The ``kind:`` a preset file declares (``recovery_sweep``, ``mitigation_faults``),
    None for a plain experiment spec or a file that is not YAML: how the CLI tells which
    runner takes a preset before loading it."""
    try:
        obj = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    kind = obj.get("kind") if isinstance(obj, dict) else None
    return kind if isinstance(kind, str) else None
