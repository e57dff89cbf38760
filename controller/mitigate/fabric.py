"""The topology as the mitigation sees it: which link a culprit names, which links a
switch has, and whether traffic can be kept off a set of links with every host still
reaching every other.

Why separate from the policy: the policy is a table of decisions; whether a reroute
is possible is a graph question answered from the topology (`routing_topology`, the
same graph the intent computes routes on), cached per set of avoided links.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from controller.intent import routing_topology
from controller.topology import LinkRole, Topology, directed_links, routes

__all__ = ["Fabric"]


@dataclass(slots=True)
class Fabric:
    topo: Topology
    _ok: dict[frozenset[str], bool] = field(default_factory=dict)
    _by_directed: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        self._by_directed = {d.name: d.link for d in directed_links(self.topo)}

    def link_of(self, component: str) -> str | None:
        """The fabric link ("s1:3-s5:3") a directed link ("s1:3->s5:3"), a link name
        or a switch port ("s1:3") lies on; None for host links and unknown names."""
        if component in self._by_directed:
            return self._by_directed[component]
        for ln in self.topo.links:
            if ln.role is LinkRole.HOST:
                continue
            if component in (ln.name, f"{ln.b}-{ln.a}", str(ln.a), str(ln.b)):
                return ln.name
        return None

    def switch_links(self, switch: str) -> tuple[str, ...]:
        """The fabric (and WAN) links of ``switch``, by name."""
        return tuple(sorted(ln.name for ln in self.topo.links_of(switch) if ln.role is not LinkRole.HOST))

    def has_hosts(self, switch: str) -> bool:
        return any(h.switch == switch for h in self.topo.hosts)

    def can_avoid(self, links: frozenset[str]) -> bool:
        """True when, without ``links``, every host's switch still routes to every host."""
        if links not in self._ok:
            rtopo = routing_topology(self.topo, links)
            rts = routes(rtopo, aggregate=False)
            leaves = {h.switch for h in self.topo.hosts}
            want = {f"{h.ipv4}/32" for h in self.topo.hosts}
            self._ok[links] = all(want <= {r.prefix for r in rts[sw]} for sw in leaves)
        return self._ok[links]
