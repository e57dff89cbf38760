"""A P4Info read once into typed objects, indexed by id and by name.

Why: every P4Runtime message names objects by P4Info id, and people name them by
name or alias; looking either up through the repeated fields of the message would
be a linear scan.  The index also records what the spec's checks need (match kinds,
parameter widths, action scopes, const tables, direct resources), so neither the
server's write path nor the client's entry builder touches the protobuf again.
Lookups that can fail belong to each end (the server answers INVALID_ARGUMENT, the
client suggests the closest name); this module only reads and indexes.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from p4.config.v1 import p4info_pb2 as P4I

__all__ = ["ActionInfo", "ArrayInfo", "DigestInfo", "MatchFieldInfo", "MatchKind", "P4InfoIndex",
           "PacketMetadataInfo", "ParamInfo", "TableInfo"]


class MatchKind(enum.StrEnum):
    """The spec's match kinds (a field of another kind keeps its other_match_type string)."""

    EXACT = "exact"
    LPM = "lpm"
    TERNARY = "ternary"
    RANGE = "range"
    OPTIONAL = "optional"


_MATCH_KIND = {P4I.MatchField.EXACT: MatchKind.EXACT, P4I.MatchField.LPM: MatchKind.LPM,
               P4I.MatchField.TERNARY: MatchKind.TERNARY, P4I.MatchField.RANGE: MatchKind.RANGE,
               P4I.MatchField.OPTIONAL: MatchKind.OPTIONAL}


def match_kind(m: Any, unset: str = "unspecified") -> MatchKind | str:
    """The kind of a P4Info MatchField: a MatchKind, or its other_match_type string."""
    return _MATCH_KIND.get(m.match_type) or m.other_match_type or unset


@dataclass(slots=True, frozen=True, kw_only=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: MatchKind | str


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
    params_by_id: dict[int, ParamInfo] = field(default_factory=dict, compare=False)


@dataclass(slots=True, kw_only=True)
class TableInfo:
    id: int
    name: str
    alias: str
    match_fields: tuple[MatchFieldInfo, ...]
    fields_by_id: dict[int, MatchFieldInfo]
    actions: dict[int, int]            # action id -> ActionRef scope, in P4Info order
    size: int
    const_default_action_id: int = 0
    is_const: bool = False
    direct_counter_id: int = 0
    direct_meter_id: int = 0
    implementation_id: int = 0

    @property
    def action_ids(self) -> tuple[int, ...]:
        return tuple(self.actions)

    @property
    def needs_priority(self) -> bool:
        """Tables with ternary, range or optional fields order entries by priority."""
        return any(m.kind in (MatchKind.TERNARY, MatchKind.RANGE, MatchKind.OPTIONAL)
                   for m in self.match_fields)


@dataclass(slots=True, frozen=True, kw_only=True)
class ArrayInfo:
    """An indexed extern (counter, meter, register) or a direct one (size 0)."""

    id: int
    name: str
    alias: str
    size: int
    unit: int = 0
    table_id: int = 0
    type_spec: P4I.P4DataTypeSpec | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class DigestInfo:
    id: int
    name: str
    alias: str
    members: tuple[tuple[str, P4I.P4DataTypeSpec], ...]
    # per member: the names an error/enum code stands for, or the width of a
    # serializable enum (P4Runtime sends those as names or enum_value bytes)
    symbols: tuple[tuple[str, tuple[str, ...]] | int | None, ...] = ()


@dataclass(slots=True, frozen=True, kw_only=True)
class PacketMetadataInfo:
    id: int
    name: str
    bitwidth: int


def _member_symbols(p4info: P4I.P4Info, spec: Any) -> tuple[str, tuple[str, ...]] | int | None:
    kind = spec.WhichOneof("type_spec")
    if kind == "error":
        return ("error", tuple(p4info.type_info.error.members))
    if kind == "enum":
        return ("enum", tuple(m.name for m in p4info.type_info.enums[spec.enum.name].members))
    if kind == "serializable_enum":
        return p4info.type_info.serializable_enums[spec.serializable_enum.name].underlying_type.bitwidth
    return None


def _alias(pre: Any) -> str:
    return str(pre.alias or pre.name)


class P4InfoIndex:
    """Every object of one P4Info by id (``tables``, ``actions``, ... are dicts id ->
    info) and by name (``by_name[kind][name or alias] -> id``).

    ``table_info`` and ``action_info`` are the classes built for tables and actions: an
    end may subclass them to add its own lookups (with its own errors)."""

    table_info: type[TableInfo] = TableInfo
    action_info: type[ActionInfo] = ActionInfo

    def __init__(self, p4info: P4I.P4Info) -> None:
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        for a in p4info.actions:
            params = tuple(ParamInfo(id=p.id, name=p.name, bitwidth=p.bitwidth) for p in a.params)
            self.actions[a.preamble.id] = self.action_info(
                id=a.preamble.id, name=a.preamble.name, alias=_alias(a.preamble), params=params,
                params_by_id={p.id: p for p in params})
        self.direct_counters = {c.preamble.id: ArrayInfo(id=c.preamble.id, name=c.preamble.name,
                                                         alias=_alias(c.preamble), size=0,
                                                         unit=c.spec.unit, table_id=c.direct_table_id)
                                for c in p4info.direct_counters}
        self.direct_meters = {m.preamble.id: ArrayInfo(id=m.preamble.id, name=m.preamble.name,
                                                       alias=_alias(m.preamble), size=0,
                                                       unit=m.spec.unit, table_id=m.direct_table_id)
                              for m in p4info.direct_meters}
        self.tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            fields = tuple(MatchFieldInfo(id=f.id, name=f.name, bitwidth=f.bitwidth, kind=match_kind(f))
                           for f in t.match_fields)
            info = self.table_info(id=t.preamble.id, name=t.preamble.name, alias=_alias(t.preamble),
                             match_fields=fields, fields_by_id={f.id: f for f in fields},
                             actions={r.id: r.scope for r in t.action_refs},
                             const_default_action_id=t.const_default_action_id,
                             is_const=t.is_const_table, size=int(t.size),
                             implementation_id=t.implementation_id)
            for rid in t.direct_resource_ids:
                if rid in self.direct_counters:
                    info.direct_counter_id = rid
                elif rid in self.direct_meters:
                    info.direct_meter_id = rid
            self.tables[info.id] = info
        self.counters = {c.preamble.id: ArrayInfo(id=c.preamble.id, name=c.preamble.name,
                                                  alias=_alias(c.preamble), size=int(c.size),
                                                  unit=c.spec.unit) for c in p4info.counters}
        self.meters = {m.preamble.id: ArrayInfo(id=m.preamble.id, name=m.preamble.name,
                                                alias=_alias(m.preamble), size=int(m.size),
                                                unit=m.spec.unit) for m in p4info.meters}
        self.registers = {r.preamble.id: ArrayInfo(id=r.preamble.id, name=r.preamble.name,
                                                   alias=_alias(r.preamble), size=int(r.size),
                                                   type_spec=r.type_spec) for r in p4info.registers}
        self.digests: dict[int, DigestInfo] = {}
        for d in p4info.digests:
            members: tuple[tuple[str, P4I.P4DataTypeSpec], ...] = ()
            if d.type_spec.WhichOneof("type_spec") == "struct":
                st = p4info.type_info.structs.get(d.type_spec.struct.name)
                if st is not None:
                    members = tuple((m.name, m.type_spec) for m in st.members)
            self.digests[d.preamble.id] = DigestInfo(
                id=d.preamble.id, name=d.preamble.name, alias=_alias(d.preamble), members=members,
                symbols=tuple(_member_symbols(p4info, spec) for _, spec in members))
        self.value_sets = {v.preamble.id: v.preamble.name for v in p4info.value_sets}
        self.value_set_fields = {
            v.preamble.id: tuple(MatchFieldInfo(id=f.id, name=f.name or f"field{f.id}", bitwidth=f.bitwidth,
                                                kind=match_kind(f, "exact"))
                                 for f in v.match)
            for v in p4info.value_sets}
        self.action_profiles = {a.preamble.id: a.preamble.name for a in p4info.action_profiles}
        self.packet_in: tuple[PacketMetadataInfo, ...] = ()
        self.packet_out: tuple[PacketMetadataInfo, ...] = ()
        for cpm in p4info.controller_packet_metadata:
            meta = tuple(PacketMetadataInfo(id=m.id, name=m.name, bitwidth=m.bitwidth) for m in cpm.metadata)
            if cpm.preamble.name == "packet_in":
                self.packet_in = meta
            elif cpm.preamble.name == "packet_out":
                self.packet_out = meta
        self.by_name: dict[str, dict[str, int]] = {}
        for kind, objs in (("table", self.tables), ("action", self.actions),
                           ("counter", self.counters), ("meter", self.meters),
                           ("register", self.registers), ("digest", self.digests)):
            names = self.by_name.setdefault(kind, {})
            for oid, obj in objs.items():   # aliases first: a full name always wins
                names.setdefault(obj.alias, oid)
            for oid, obj in objs.items():
                names[obj.name] = oid
