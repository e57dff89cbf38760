"""A finished run's results folder as the page's source (``controller web --out DIR``).

A ``demo`` or ``experiment`` folder keeps the controller's state under
``logs/controller/`` and the topology it ran as ``logs/topology.yaml``; a plain
``controller run --out DIR`` keeps the state file in DIR itself and the topology is
given with ``--topology``.
"""
from __future__ import annotations

from pathlib import Path

from .server import WebError

TOPOLOGY_PLACES = ("logs/topology.yaml", "topology.yaml")


def find_state(out: Path, state_file: str) -> Path:
    """``state_file`` (the runner's file name) in OUT itself or in OUT/logs/controller/."""
    places = (state_file, f"logs/controller/{state_file}")
    for rel in places:
        if (out / rel).is_file():
            return out / rel
    raise WebError(f"{out}: no controller state ({' or '.join(places)}); give the --out "
                   "of `controller run`, `demo` or `experiment`")


def find_topology(out: Path, given: str | None) -> Path:
    if given:
        return Path(given)
    for rel in TOPOLOGY_PLACES:
        if (out / rel).is_file():
            return out / rel
    raise WebError(f"{out}: no topology file ({' or '.join(TOPOLOGY_PLACES)}); give --topology FILE")
