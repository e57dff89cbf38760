"""Where each node sits on the page: sites side by side, layers bottom-up
(hosts, leaves, spines, border switches), so a leaf-spine reads as one."""
from __future__ import annotations

from controller.topology.model import SwitchRole, Topology

_LAYER = {SwitchRole.LEAF: 1, SwitchRole.SPINE: 2, SwitchRole.BORDER: 3}


def node_positions(topo: Topology) -> dict[str, tuple[float, float]]:
    """``{node: (x, y)}`` in arbitrary units (the page scales them)."""
    site_of = {s.name: s.site for s in topo.switches}
    for h in topo.hosts:
        site_of[h.name] = site_of.get(h.switch, "")
    sites = sorted(set(site_of.values()))
    rows: dict[tuple[str, int], list[str]] = {}
    for s in topo.switches:
        rows.setdefault((s.site, _LAYER.get(s.role, 1)), []).append(s.name)
    for h in sorted(topo.hosts, key=lambda h: (h.switch, h.port)):
        rows.setdefault((site_of[h.name], 0), []).append(h.name)
    width = max((len(v) for v in rows.values()), default=1)
    pos: dict[str, tuple[float, float]] = {}
    for (site, layer), names in rows.items():
        base = sites.index(site) * (width + 1.5)
        step = width / len(names)
        for i, name in enumerate(names):
            pos[name] = (base + step * (i + 0.5), float(layer))
    return pos
