"""The preset experiment specs shipped in ``mininet_topos/presets/``."""
from __future__ import annotations

from pathlib import Path

from controller.topology.errors import did_you_mean

from .errors import SpecError

__all__ = ["PRESETS", "PRESETS_DIR", "SWEEP_PRESETS", "preset_path"]

PRESETS_DIR = Path(__file__).resolve().parent.parent / "presets"
PRESETS = ("demo", "incast_cc", "wan_hpcc", "wan_loss", "rogue", "demo_ebpf", "demo_1k",
           "incast_cc_ebpf", "wan_loss_ebpf")
#: presets that are not Mininet specs (``kind: recovery_sweep``, ``recovery_sweep.py``;
#: ``kind: mitigation_faults``, ``mininet_topos/faults/recovery_run.py``)
SWEEP_PRESETS = ("wan_recovery", "recovery_faults")


def preset_path(name_or_path: str | Path) -> Path:
    """A preset by name ("demo") or any spec file by path."""
    p = Path(name_or_path)
    if p.suffix.lower() in (".yaml", ".yml", ".json") or p.exists():
        return p
    names = PRESETS + SWEEP_PRESETS
    if str(name_or_path) not in names:
        raise SpecError(f"experiment {str(name_or_path)!r}: neither a file nor a preset "
                        f"({', '.join(names)})" + did_you_mean(str(name_or_path), names))
    return PRESETS_DIR / f"{name_or_path}.yaml"
