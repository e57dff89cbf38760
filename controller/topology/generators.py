"""The standard topologies of the test bed, built as validated :class:`Topology` objects.

Numbering is fixed so files, plots and tests agree: switches s1.. (device_id, INT node
ID and gRPC port 50000+n follow n), hosts h1..; on a leaf, host ports come first
(1..H) then uplinks; a spine's ports go to leaves in order, then to the WAN.  Hosts of
leaf L get 10.<site>.<L>.<j>/24 with the gateway at .254.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from common.loss import LossModel

from .model import Endpoint, Host, Link, LinkRole, Switch, SwitchRole, Topology
from .validate import validate

__all__ = ["GENERATORS", "dumbbell", "leaf_spine", "two_datacenters"]

GRPC_BASE_PORT = 50000


@dataclass(slots=True)
class _Builder:
    """Accumulates nodes and links with the numbering conventions above."""

    name: str
    switches: list[Switch] = field(default_factory=list)
    hosts: list[Host] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)

    def switch(self, role: SwitchRole, site: str = "") -> str:
        n = len(self.switches) + 1
        self.switches.append(Switch(name=f"s{n}", device_id=n, node_id=n, role=role,
                                    grpc_addr=f"127.0.0.1:{GRPC_BASE_PORT + n}", site=site))
        return f"s{n}"

    def host(self, switch: str, port: int, net: tuple[int, int], j: int, *, rate_mbps: float,
             mtu: int) -> str:
        n = len(self.hosts) + 1
        a, b = net
        name = f"h{n}"
        self.hosts.append(Host(name=name, ip=f"10.{a}.{b}.{j}/24",
                               mac=f"00:00:0a:{a:02x}:{b:02x}:{j:02x}", switch=switch, port=port))
        self.links.append(Link(a=Endpoint(node=name, port=0), b=Endpoint(node=switch, port=port),
                               role=LinkRole.HOST, rate_mbps=rate_mbps, mtu=mtu))
        return name

    def link(self, a: str, pa: int, b: str, pb: int, **shaping) -> None:
        self.links.append(Link(a=Endpoint(node=a, port=pa), b=Endpoint(node=b, port=pb),
                               **shaping))

    def build(self) -> Topology:
        return validate(Topology(name=self.name, switches=tuple(self.switches),
                                 hosts=tuple(self.hosts), links=tuple(self.links)))


def dumbbell(n_senders: int = 4, *, host_rate_mbps: float = 100.0,
             bottleneck_rate_mbps: float = 100.0, bottleneck_delay_ms: float = 0.0,
             bottleneck_queue_pkts: int = 64, host_mtu: int = 1500,
             fabric_mtu: int = 2000) -> Topology:
    """N senders h1..hN on s1, one bottleneck link s1:N+1 - s2:2, the receiver h{N+1}
    on s2 port 1 (the incast topology)."""
    if not 1 <= n_senders <= 64:
        raise ValueError(f"dumbbell: n_senders {n_senders} out of range 1..64")
    b = _Builder(name=f"dumbbell-{n_senders}")
    s1, s2 = b.switch(SwitchRole.LEAF), b.switch(SwitchRole.LEAF)
    for j in range(1, n_senders + 1):
        b.host(s1, j, (0, 1), j, rate_mbps=host_rate_mbps, mtu=host_mtu)
    b.host(s2, 1, (0, 2), 1, rate_mbps=host_rate_mbps, mtu=host_mtu)
    b.link(s1, n_senders + 1, s2, 2, role=LinkRole.FABRIC, rate_mbps=bottleneck_rate_mbps,
           delay_ms=bottleneck_delay_ms, queue_pkts=bottleneck_queue_pkts, mtu=fabric_mtu)
    return b.build()


def _fabric(b: _Builder, site: str, site_no: int, n_spines: int, n_leaves: int,
            hosts_per_leaf: int, spine_role: SwitchRole, host_rate_mbps: float,
            fabric_rate_mbps: float, host_mtu: int, fabric_mtu: int) -> list[str]:
    spines = [b.switch(spine_role, site) for _ in range(n_spines)]
    for li in range(1, n_leaves + 1):
        leaf = b.switch(SwitchRole.LEAF, site)
        for j in range(1, hosts_per_leaf + 1):
            b.host(leaf, j, (site_no, li), j, rate_mbps=host_rate_mbps, mtu=host_mtu)
        for si, spine in enumerate(spines):
            b.link(spine, li, leaf, hosts_per_leaf + 1 + si, role=LinkRole.FABRIC,
                   rate_mbps=fabric_rate_mbps, mtu=fabric_mtu)
    return spines


def leaf_spine(n_leaves: int = 2, *, n_spines: int = 2, hosts_per_leaf: int = 2,
               host_rate_mbps: float = 100.0, fabric_rate_mbps: float = 100.0,
               host_mtu: int = 1500, fabric_mtu: int = 2000) -> Topology:
    """Spines s1..sS, leaves after them, each leaf with its hosts; every leaf joins every
    spine, so traffic between leaves has an S-way ECMP choice."""
    if not 2 <= n_leaves <= 16:
        raise ValueError(f"leaf_spine: n_leaves {n_leaves} out of range 2..16")
    if not 1 <= n_spines <= 8:
        raise ValueError(f"leaf_spine: n_spines {n_spines} out of range 1..8")
    if not 1 <= hosts_per_leaf <= 16:
        raise ValueError(f"leaf_spine: hosts_per_leaf {hosts_per_leaf} out of range 1..16")
    b = _Builder(name=f"leaf-spine-{n_spines}x{n_leaves}")
    _fabric(b, "", 0, n_spines, n_leaves, hosts_per_leaf, SwitchRole.SPINE, host_rate_mbps,
            fabric_rate_mbps, host_mtu, fabric_mtu)
    return b.build()


def two_datacenters(*, n_spines: int = 2, n_leaves: int = 2, hosts_per_leaf: int = 2,
                    wan_delay_ms: float = 10.0, wan_jitter_ms: float = 0.0,
                    wan_rate_mbps: float = 100.0,
                    wan_loss: LossModel | Sequence[LossModel] | None = None,
                    n_wan_links: int = 2, host_rate_mbps: float = 100.0,
                    fabric_rate_mbps: float = 100.0, host_mtu: int = 1500,
                    fabric_mtu: int = 2000) -> Topology:
    """Two leaf-spine sites dc1 and dc2; their spines are border switches joined by
    ``n_wan_links`` WAN links (spine i of dc1 to spine i of dc2, several links between
    the same pair when there are fewer spines).  ``wan_loss`` is one model for every WAN
    link or one per link."""
    if not 1 <= n_wan_links <= 8:
        raise ValueError(f"two_datacenters: n_wan_links {n_wan_links} out of range 1..8")
    if wan_loss is None:
        wan_loss = LossModel.none()
    losses = [wan_loss] * n_wan_links if isinstance(wan_loss, LossModel) else list(wan_loss)
    if len(losses) != n_wan_links:
        raise ValueError(f"two_datacenters: wan_loss has {len(losses)} models for "
                         f"{n_wan_links} WAN links")
    b = _Builder(name="two-dc")
    sites = [_fabric(b, f"dc{k}", k, n_spines, n_leaves, hosts_per_leaf, SwitchRole.BORDER,
                     host_rate_mbps, fabric_rate_mbps, host_mtu, fabric_mtu) for k in (1, 2)]
    next_port = {s: n_leaves + 1 for spines in sites for s in spines}
    for i in range(n_wan_links):
        a, z = sites[0][i % n_spines], sites[1][i % n_spines]
        b.link(a, next_port[a], z, next_port[z], role=LinkRole.WAN, rate_mbps=wan_rate_mbps,
               delay_ms=wan_delay_ms, jitter_ms=wan_jitter_ms, loss=losses[i], mtu=fabric_mtu)
        next_port[a] += 1
        next_port[z] += 1
    return b.build()


GENERATORS: Mapping[str, Callable[..., Topology]] = MappingProxyType(
    {"dumbbell": dumbbell, "leaf-spine": leaf_spine, "two-dc": two_datacenters})
