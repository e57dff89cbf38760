"""Where each node sits on the page: sites side by side, layers bottom-up
(hosts, leaves, spines, border switches), so a leaf-spine reads as one.

The switches of a row that has links to another site are staggered in height: with
the sites side by side, two inter-site links from one row would otherwise be drawn on
one straight line, each passing behind the other's end switch (s1-s5 across s2, in
the two-datacenter topology), and a red WAN link would look like a red s1-s2 link."""
from __future__ import annotations

from controller.topology.model import SwitchRole, Topology

_LAYER = {SwitchRole.LEAF: 1, SwitchRole.SPINE: 2, SwitchRole.BORDER: 3}
STAGGER = 0.3
"""Height between neighbours of a row with inter-site links (a layer is 1)."""


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
    inter_site = {end.node for ln in topo.links for end in (ln.a, ln.b)
                  if site_of.get(ln.a.node) != site_of.get(ln.b.node)}
    pos: dict[str, tuple[float, float]] = {}
    for (site, layer), names in rows.items():
        base = sites.index(site) * (width + 1.5)
        step = width / len(names)
        rise = STAGGER if inter_site.intersection(names) else 0.0
        for i, name in enumerate(names):
            pos[name] = (base + step * (i + 0.5), float(layer) + rise * i)
    return pos
