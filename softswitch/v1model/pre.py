"""Packet replication engine: multicast groups and clone (mirror) sessions.

Kept apart from the pipeline so the runtime API (and later the P4Runtime
server) configures it without touching packet processing. Multicast nodes
mirror BMv2's model (a node = rid + ports, associated with groups), which is
what STF files use; P4Runtime's replica lists map onto the same groups.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from softswitch.errors import RuntimeApiError, RuntimeErrorCode
from softswitch.v1model.ports import MAX_PORT


@dataclass(slots=True, frozen=True, kw_only=True)
class Replica:
    """One copy: egress port and replication id (``instance`` in P4Runtime)."""

    port: int
    rid: int = 0


@dataclass(slots=True, kw_only=True)
class CloneSession:
    session: int
    replicas: list[Replica]
    truncate: int = 0          # packet_length_bytes: 0 means whole packet
    class_of_service: int = 0


@dataclass(slots=True, kw_only=True)
class McNode:
    rid: int
    ports: list[int]


@dataclass(slots=True, kw_only=True)
class ReplicationEngine:
    """Multicast groups (group id -> replicas) and clone sessions (id -> replicas)."""

    groups: dict[int, list[Replica]] = field(default_factory=dict)
    sessions: dict[int, CloneSession] = field(default_factory=dict)
    nodes: dict[int, McNode] = field(default_factory=dict)
    node_groups: dict[int, set[int]] = field(default_factory=dict)
    _next_node: int = 0

    @staticmethod
    def _check_replicas(where: str, replicas: list[Replica]) -> None:
        seen = set()
        for r in replicas:
            if not 0 <= r.port <= MAX_PORT or not 0 <= r.rid < 1 << 16:
                raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                      f"{where}: replica port {r.port} / rid {r.rid} out of range")
            if (r.port, r.rid) in seen:
                raise RuntimeApiError(RuntimeErrorCode.DUPLICATE_ENTRY,
                                      f"{where}: replica port {r.port} rid {r.rid} given twice")
            seen.add((r.port, r.rid))

    # ----------------------------------------------------------- multicast
    def group_create(self, group: int, replicas: list[Replica] | None = None) -> None:
        if not 0 < group < 1 << 16:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, f"multicast group {group}: id must be 1..65535")
        if group in self.groups:
            raise RuntimeApiError(RuntimeErrorCode.DUPLICATE_ENTRY, f"multicast group {group} exists")
        replicas = list(replicas or [])
        self._check_replicas(f"multicast group {group}", replicas)
        self.groups[group] = replicas

    def group_modify(self, group: int, replicas: list[Replica]) -> None:
        if group not in self.groups:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"multicast group {group} does not exist")
        self._check_replicas(f"multicast group {group}", replicas)
        self.groups[group] = list(replicas)

    def group_delete(self, group: int) -> None:
        if self.groups.pop(group, None) is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"multicast group {group} does not exist")

    def node_create(self, rid: int, ports: list[int]) -> int:
        """Create a BMv2-style node (rid + ports); returns its handle (0, 1, ...)."""
        self._check_replicas(f"multicast node rid {rid}", [Replica(port=p, rid=rid) for p in ports])
        h = self._next_node
        self._next_node += 1
        self.nodes[h] = McNode(rid=rid, ports=list(ports))
        return h

    def node_associate(self, group: int, handle: int) -> None:
        if group not in self.groups:
            self.group_create(group)
        node = self.nodes.get(handle)
        if node is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"multicast node {handle} does not exist")
        self.groups[group] = self.groups[group] + [Replica(port=p, rid=node.rid) for p in node.ports]
        self.node_groups.setdefault(handle, set()).add(group)

    def node_update(self, handle: int, ports: list[int]) -> None:
        """New ports for a node; the groups it is associated with follow."""
        node = self.nodes.get(handle)
        if node is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"multicast node {handle} does not exist")
        self._check_replicas(f"multicast node {handle}", [Replica(port=p, rid=node.rid) for p in ports])
        old = {Replica(port=p, rid=node.rid) for p in node.ports}
        for group in self.node_groups.get(handle, ()):
            kept = [r for r in self.groups.get(group, []) if r not in old]
            self.groups[group] = kept + [Replica(port=p, rid=node.rid) for p in ports]
        node.ports = list(ports)

    # -------------------------------------------------------------- clones
    def session_set(self, session: int, replicas: list[Replica], *, truncate: int = 0,
                    class_of_service: int = 0) -> None:
        if not 0 <= session < 1 << 32:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE, f"clone session {session}: bad id")
        if truncate < 0:
            raise RuntimeApiError(RuntimeErrorCode.BAD_VALUE,
                                  f"clone session {session}: negative truncation {truncate}")
        self._check_replicas(f"clone session {session}", replicas)
        self.sessions[session] = CloneSession(session=session, replicas=list(replicas),
                                              truncate=truncate, class_of_service=class_of_service)

    def session_delete(self, session: int) -> None:
        if self.sessions.pop(session, None) is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND, f"clone session {session} does not exist")
