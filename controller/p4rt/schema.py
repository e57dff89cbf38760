"""P4Info as a typed schema: names <-> ids for every object the controller touches.

Why: entries are written with readable names ("SwitchIngress.ipv4_lpm", "dst_addr");
the wire wants ids.  One lookup object, built once per pipeline, answers both ways and
turns an unknown name into an error with the closest known one.
"""
from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field

from p4.config.v1 import p4info_pb2 as P4I

from .errors import SchemaError, did_you_mean


class MatchKind(enum.IntEnum):
    """P4Info MatchField.MatchType values (spec names)."""

    EXACT = P4I.MatchField.EXACT
    LPM = P4I.MatchField.LPM
    TERNARY = P4I.MatchField.TERNARY
    RANGE = P4I.MatchField.RANGE
    OPTIONAL = P4I.MatchField.OPTIONAL


@dataclass(slots=True, frozen=True, kw_only=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: MatchKind


@dataclass(slots=True, frozen=True, kw_only=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(slots=True, frozen=True, kw_only=True)
class ActionInfo:
    id: int
    name: str
    alias: str
    params: tuple[ParamInfo, ...]

    def param(self, name: str) -> ParamInfo:
        for p in self.params:
            if p.name == name:
                return p
        raise SchemaError(f"action {self.name}: no parameter {name!r}"
                          f"{did_you_mean(name, [p.name for p in self.params])}; "
                          f"parameters: {[p.name for p in self.params]}")

    def param_by_id(self, pid: int) -> ParamInfo:
        for p in self.params:
            if p.id == pid:
                return p
        raise SchemaError(f"action {self.name}: no parameter id {pid}")


@dataclass(slots=True, frozen=True, kw_only=True)
class TableInfo:
    id: int
    name: str
    alias: str
    match_fields: tuple[MatchFieldInfo, ...]
    action_ids: tuple[int, ...]
    size: int
    const_default_action_id: int = 0
    is_const: bool = False

    @property
    def needs_priority(self) -> bool:
        """Tables with ternary, range or optional fields order entries by priority."""
        return any(m.kind in (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL)
                   for m in self.match_fields)

    def field(self, name: str) -> MatchFieldInfo:
        for m in self.match_fields:
            if m.name == name:
                return m
        raise SchemaError(f"table {self.name}: no match field {name!r}"
                          f"{did_you_mean(name, [m.name for m in self.match_fields])}; "
                          f"fields: {[m.name for m in self.match_fields]}")

    def field_by_id(self, fid: int) -> MatchFieldInfo:
        for m in self.match_fields:
            if m.id == fid:
                return m
        raise SchemaError(f"table {self.name}: no match field id {fid}")


@dataclass(slots=True, frozen=True, kw_only=True)
class ObjectInfo:
    """Counters, registers, digests, direct counters: id, name and size."""

    id: int
    name: str
    alias: str
    size: int = 0
    kind: str = ""


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(slots=True, kw_only=True)
class Schema:
    """Everything of one P4Info the client needs, looked up by name, alias or id."""

    p4info: P4I.P4Info
    tables: dict[str, TableInfo] = field(default_factory=dict)
    actions: dict[str, ActionInfo] = field(default_factory=dict)
    counters: dict[str, ObjectInfo] = field(default_factory=dict)
    registers: dict[str, ObjectInfo] = field(default_factory=dict)
    digests: dict[str, ObjectInfo] = field(default_factory=dict)
    packet_in: tuple[PacketMetadataInfo, ...] = ()
    packet_out: tuple[PacketMetadataInfo, ...] = ()
    _ids: dict[int, object] = field(default_factory=dict)
    _alias: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def from_p4info(cls, p4info: P4I.P4Info) -> Schema:
        s = cls(p4info=p4info)
        for a in p4info.actions:
            s._add("action", s.actions, ActionInfo(
                id=a.preamble.id, name=a.preamble.name, alias=a.preamble.alias or a.preamble.name,
                params=tuple(ParamInfo(id=p.id, name=p.name, bitwidth=p.bitwidth) for p in a.params)))
        known_kinds = {k.value for k in MatchKind}
        for t in p4info.tables:
            for m in t.match_fields:
                if m.match_type not in known_kinds:
                    kind = m.other_match_type or f"match type {m.match_type}"
                    raise SchemaError(f"table {t.preamble.name}: match field {m.name!r} has match kind "
                                      f"{kind!r}, which this client does not support")
            s._add("table", s.tables, TableInfo(
                id=t.preamble.id, name=t.preamble.name, alias=t.preamble.alias or t.preamble.name,
                match_fields=tuple(MatchFieldInfo(id=m.id, name=m.name, bitwidth=m.bitwidth,
                                                  kind=MatchKind(m.match_type)) for m in t.match_fields),
                action_ids=tuple(r.id for r in t.action_refs), size=int(t.size),
                const_default_action_id=t.const_default_action_id, is_const=t.is_const_table))
        for c in p4info.counters:
            s._add("counter", s.counters, ObjectInfo(id=c.preamble.id, name=c.preamble.name,
                                                      alias=c.preamble.alias or c.preamble.name,
                                                      size=int(c.size), kind="counter"))
        for r in p4info.registers:
            s._add("register", s.registers, ObjectInfo(id=r.preamble.id, name=r.preamble.name,
                                                        alias=r.preamble.alias or r.preamble.name,
                                                        size=int(r.size), kind="register"))
        for d in p4info.digests:
            s._add("digest", s.digests, ObjectInfo(id=d.preamble.id, name=d.preamble.name,
                                                    alias=d.preamble.alias or d.preamble.name, kind="digest"))
        for cpm in p4info.controller_packet_metadata:
            meta = tuple(PacketMetadataInfo(id=m.id, name=m.name, bitwidth=m.bitwidth) for m in cpm.metadata)
            if cpm.preamble.name == "packet_in":
                s.packet_in = meta
            elif cpm.preamble.name == "packet_out":
                s.packet_out = meta
        return s

    def _add(self, kind: str, table: dict, info: object) -> None:  # type: ignore[type-arg]
        name = info.name  # type: ignore[attr-defined]
        table[name] = info
        self._ids[info.id] = info  # type: ignore[attr-defined]
        aliases = self._alias.setdefault(kind, {})
        aliases[info.alias] = name  # type: ignore[attr-defined]

    def _lookup(self, kind: str, table: dict, name: str):  # type: ignore[no-untyped-def,type-arg]
        if name in table:
            return table[name]
        full = self._alias.get(kind, {}).get(name)
        if full is not None:
            return table[full]
        known = list(table) + list(self._alias.get(kind, {}))
        raise SchemaError(f"P4Info has no {kind} {name!r}{did_you_mean(name, known)}")

    def table(self, name: str) -> TableInfo:
        return self._lookup("table", self.tables, name)  # type: ignore[no-any-return]

    def action(self, name: str) -> ActionInfo:
        return self._lookup("action", self.actions, name)  # type: ignore[no-any-return]

    def counter(self, name: str) -> ObjectInfo:
        return self._lookup("counter", self.counters, name)  # type: ignore[no-any-return]

    def register(self, name: str) -> ObjectInfo:
        return self._lookup("register", self.registers, name)  # type: ignore[no-any-return]

    def digest(self, name: str) -> ObjectInfo:
        return self._lookup("digest", self.digests, name)  # type: ignore[no-any-return]

    def by_id(self, oid: int) -> TableInfo | ActionInfo | ObjectInfo:
        try:
            return self._ids[oid]  # type: ignore[return-value]
        except KeyError:
            raise SchemaError(f"P4Info has no object with id {oid} (0x{oid:08x})") from None

    def table_by_id(self, oid: int) -> TableInfo:
        obj = self.by_id(oid)
        if not isinstance(obj, TableInfo):
            raise SchemaError(f"id {oid} (0x{oid:08x}) is {obj.name!r}, not a table")
        return obj

    def action_by_id(self, oid: int) -> ActionInfo:
        obj = self.by_id(oid)
        if not isinstance(obj, ActionInfo):
            raise SchemaError(f"id {oid} (0x{oid:08x}) is {obj.name!r}, not an action")
        return obj

    def table_actions(self, table: TableInfo) -> Iterator[ActionInfo]:
        for aid in table.action_ids:
            yield self.action_by_id(aid)

    def check_action_of(self, table: TableInfo, action: ActionInfo) -> None:
        if action.id not in table.action_ids:
            names = [a.name for a in self.table_actions(table)]
            raise SchemaError(f"table {table.name}: action {action.name!r} is not one of its actions "
                              f"{names}{did_you_mean(action.name, names)}")
