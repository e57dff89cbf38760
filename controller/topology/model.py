"""Topology as data: switches, hosts, links and their loss models.

Why: the controller (routes, watchlists, line rates) and the test bed (Mininet nodes,
WAN links) must agree on one description of the network.  These classes are that
description: immutable, checkable without root (see :mod:`.validate`), and written to
and read from YAML/JSON by :mod:`.load`.

Units are in the field names (``rate_mbps``, ``delay_ms``).  A host's side of its link is
port 0 (its first interface, ``h1-eth0``); switch ports are v1model port numbers.
"""
from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field

# v1model's port numbers: DROP_PORT is never a data or CPU port
from common.loss import LossKind, LossModel
from softswitch.v1model.ports import DEFAULT_CPU_PORT, DROP_PORT

__all__ = [
    "DEFAULT_CPU_PORT",
    "DROP_PORT",
    "HOST_PORT",
    "Endpoint",
    "Host",
    "Link",
    "LinkRole",
    "Switch",
    "SwitchRole",
    "Topology",
]

HOST_PORT = 0    # a host's interface index on its (single) link


class SwitchRole(enum.StrEnum):
    """What a switch is for; informational except that leaves are where hosts attach."""

    LEAF = "leaf"
    SPINE = "spine"
    BORDER = "border"


class LinkRole(enum.StrEnum):
    """Host links carry INT source/sink duty, fabric/WAN links carry link sequence numbers."""

    FABRIC = "fabric"
    HOST = "host"
    WAN = "wan"


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class Endpoint:
    """One end of a link: a node name and its port (``HOST_PORT`` for a host)."""

    node: str
    port: int

    def __str__(self) -> str:
        return f"{self.node}:{self.port}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SwitchTls:
    """P4Runtime over TLS to one switch (PEM paths, e.g. from ``python -m controller certs``).

    ``ca`` signed the switch's certificate and the clients' (mutual TLS: the switch
    refuses a client without one); ``cert``/``key`` are the switch's own (used by the
    test bed to start it); ``server_name`` is the name checked in its certificate."""

    ca: str
    cert: str = ""
    key: str = ""
    server_name: str = ""

    def to_dict(self) -> dict[str, object]:
        return {k: v for k, v in (("ca", self.ca), ("cert", self.cert), ("key", self.key),
                                  ("server_name", self.server_name)) if v}


@dataclass(frozen=True, slots=True, kw_only=True)
class Switch:
    """A P4 switch: how the controller reaches it and how INT names it."""

    name: str
    device_id: int
    grpc_addr: str
    cpu_port: int = DEFAULT_CPU_PORT
    role: SwitchRole = SwitchRole.LEAF
    node_id: int = 0          # INT node ID; 0 means "same as device_id" (see int_node_id)
    mac: str = ""             # router MAC; "" means derived from device_id (see router_mac)
    site: str = ""            # datacenter name, "" for a single-site topology
    tls: SwitchTls | None = None   # P4Runtime over (mutual) TLS to this switch

    @property
    def int_node_id(self) -> int:
        return self.node_id or self.device_id

    @property
    def router_mac(self) -> str:
        """The MAC this switch uses as source, and hosts use to reach their gateway."""
        if self.mac:
            return self.mac.lower()
        d = self.device_id & 0xFFFFFFFF
        return "02:00:" + ":".join(f"{(d >> s) & 0xFF:02x}" for s in (24, 16, 8, 0))

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {
            "name": self.name, "device_id": self.device_id, "grpc_addr": self.grpc_addr,
            "cpu_port": self.cpu_port, "role": str(self.role),
            "node_id": self.int_node_id,
        }
        if self.mac:
            out["mac"] = self.mac
        if self.site:
            out["site"] = self.site
        if self.tls is not None:
            out["tls"] = self.tls.to_dict()
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Host:
    """An end host: one interface with an IPv4 address in a subnet, on one switch port."""

    name: str
    ip: str                   # "10.0.1.1/24" (prefix length optional, default /24)
    mac: str
    switch: str
    port: int
    gateway: str = ""         # "" means the .254 of the host's subnet (see gateway_ip)

    @property
    def interface(self) -> ipaddress.IPv4Interface:
        return ipaddress.IPv4Interface(self.ip if "/" in self.ip else self.ip + "/24")

    @property
    def ipv4(self) -> str:
        """The bare address, without prefix length."""
        return str(self.interface.ip)

    @property
    def subnet(self) -> ipaddress.IPv4Network:
        return self.interface.network

    @property
    def gateway_ip(self) -> str:
        if self.gateway:
            return self.gateway
        net = self.subnet
        return str(net.broadcast_address - 1) if net.prefixlen <= 30 else str(net.network_address)

    @property
    def intf_name(self) -> str:
        return f"{self.name}-eth{HOST_PORT}"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"name": self.name, "ip": str(self.interface), "mac": self.mac,
                                  "switch": self.switch, "port": self.port}
        if self.gateway:
            out["gateway"] = self.gateway
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A bidirectional link; shaping applies to each direction independently."""

    a: Endpoint
    b: Endpoint
    role: LinkRole = LinkRole.FABRIC
    rate_mbps: float = 1000.0
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: LossModel = field(default_factory=LossModel)
    mtu: int = 1500
    queue_pkts: int = 64      # egress queue depth of the switch port(s) on this link

    @property
    def name(self) -> str:
        """"s1:3-s2:1": how errors, loss maps and plots name the link."""
        return f"{self.a}-{self.b}"

    def endpoints(self) -> tuple[Endpoint, Endpoint]:
        return (self.a, self.b)

    def other(self, node: str) -> Endpoint:
        """The far end seen from ``node``."""
        if self.a.node == node:
            return self.b
        if self.b.node == node:
            return self.a
        raise KeyError(f"link {self.name}: node {node} is not one of its ends")

    def end(self, node: str) -> Endpoint:
        """The near end at ``node``."""
        if self.a.node == node:
            return self.a
        if self.b.node == node:
            return self.b
        raise KeyError(f"link {self.name}: node {node} is not one of its ends")

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"a": str(self.a), "b": str(self.b), "role": str(self.role),
                                  "rate_mbps": self.rate_mbps}
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.jitter_ms:
            out["jitter_ms"] = self.jitter_ms
        if self.loss.kind is not LossKind.NONE:
            out["loss"] = self.loss.to_dict()
        out["mtu"] = self.mtu
        out["queue_pkts"] = self.queue_pkts
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Topology:
    """The whole network.  Build it, then run :func:`~.validate.validate` on it.

    ``links`` holds every link, host links included (the loader adds a host link for
    each host whose link the file does not list).
    """

    name: str
    switches: tuple[Switch, ...]
    hosts: tuple[Host, ...]
    links: tuple[Link, ...]

    def switch(self, name: str) -> Switch:
        for sw in self.switches:
            if sw.name == name:
                return sw
        from .errors import RoutingError, did_you_mean
        raise RoutingError(f"topology {self.name}: no switch {name!r}"
                           + did_you_mean(name, self.switch_names))

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        from .errors import RoutingError, did_you_mean
        raise RoutingError(f"topology {self.name}: no host {name!r}"
                           + did_you_mean(name, self.host_names))

    @property
    def switch_names(self) -> list[str]:
        return [s.name for s in self.switches]

    @property
    def host_names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def links_of(self, node: str) -> list[Link]:
        return [ln for ln in self.links if ln.a.node == node or ln.b.node == node]

    def link_at(self, node: str, port: int) -> Link:
        """The link on ``node``'s ``port``."""
        for ln in self.links:
            for ep in ln.endpoints():
                if ep.node == node and ep.port == port:
                    return ln
        from .errors import RoutingError
        raise RoutingError(f"topology {self.name}: nothing is attached to {node}:{port}")

    def link(self, name: str) -> Link:
        """The link named "s1:3-s2:1" (either order of the two ends)."""
        for ln in self.links:
            if name in (ln.name, f"{ln.b}-{ln.a}"):
                return ln
        from .errors import RoutingError, did_you_mean
        raise RoutingError(f"topology {self.name}: no link {name!r}"
                           + did_you_mean(name, [ln.name for ln in self.links]))

    def to_dict(self) -> dict[str, object]:
        """A plain mapping in the file format (every link listed, host links included)."""
        return {
            "name": self.name,
            "switches": [s.to_dict() for s in self.switches],
            "hosts": [h.to_dict() for h in self.hosts],
            "links": [ln.to_dict() for ln in self.links],
        }
