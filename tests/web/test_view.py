"""Where the page draws the nodes: no link passes behind a switch it does not end at."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.topology.load import load_topology
from controller.web.layout import node_positions

TOPOFILES = Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"


def _on_segment(p: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> bool:
    """``p`` on the straight segment a-b, strictly between its ends."""
    cross = (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])
    if abs(cross) > 1e-9:
        return False
    dot = (p[0] - a[0]) * (b[0] - a[0]) + (p[1] - a[1]) * (b[1] - a[1])
    return 0 < dot < (b[0] - a[0]) ** 2 + (b[1] - a[1]) ** 2


@pytest.mark.parametrize("name", sorted(p.name for p in TOPOFILES.glob("*.yaml")))
def test_no_link_is_drawn_through_another_switch(name: str) -> None:
    topo = load_topology(TOPOFILES / name)
    pos = node_positions(topo)
    for ln in topo.links:
        a, b = pos[ln.a.node], pos[ln.b.node]
        through = [s.name for s in topo.switches if s.name not in (ln.a.node, ln.b.node)
                   and _on_segment(pos[s.name], a, b)]
        assert not through, f"{ln.a.node}-{ln.b.node} is drawn through {through}"
