"""A P4Info indexed by id, built once per pipeline.

Why: every update names objects by P4Info id; looking them up through the
repeated fields of the message on each update would be a linear scan. The
schema also records what the spec's checks need (match kinds, parameter widths,
action scopes, const tables) so the write path never touches the protobuf.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, TypeVar

from p4.config.v1 import p4info_pb2 as P4I

from softswitch.p4runtime.errors import P4RuntimeError, invalid

V = TypeVar("V")
MATCH_KIND = {P4I.MatchField.EXACT: "exact", P4I.MatchField.LPM: "lpm",
              P4I.MatchField.TERNARY: "ternary", P4I.MatchField.RANGE: "range",
              P4I.MatchField.OPTIONAL: "optional"}


@dataclass(slots=True, frozen=True, kw_only=True)
class MatchFieldInfo:
    id: int
    name: str
    bitwidth: int
    kind: str  # exact, lpm, ternary, range, optional or the other_match_type string


@dataclass(slots=True, frozen=True, kw_only=True)
class ParamInfo:
    id: int
    name: str
    bitwidth: int


@dataclass(slots=True, kw_only=True)
class ActionInfo:
    id: int
    name: str
    params: tuple[ParamInfo, ...]
    by_id: dict[int, ParamInfo] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class TableInfo:
    id: int
    name: str
    fields: tuple[MatchFieldInfo, ...]
    by_id: dict[int, MatchFieldInfo]
    actions: dict[int, int]            # action id -> ActionRef scope
    const_default_action_id: int
    is_const: bool
    size: int
    direct_counter_id: int = 0
    direct_meter_id: int = 0
    implementation_id: int = 0


@dataclass(slots=True, frozen=True, kw_only=True)
class ArrayInfo:
    """An indexed extern (counter, meter, register) or a direct one (size 0)."""

    id: int
    name: str
    size: int
    unit: int = 0
    table_id: int = 0
    type_spec: P4I.P4DataTypeSpec | None = None


@dataclass(slots=True, frozen=True, kw_only=True)
class DigestInfo:
    id: int
    name: str
    members: tuple[tuple[str, P4I.P4DataTypeSpec], ...]
    # per member: the names an error/enum code stands for, or the width of a
    # serializable enum (P4Runtime sends those as names or enum_value bytes)
    symbols: tuple[tuple[str, tuple[str, ...]] | int | None, ...] = ()


def _member_symbols(p4info: P4I.P4Info, spec: Any) -> tuple[str, tuple[str, ...]] | int | None:
    kind = spec.WhichOneof("type_spec")
    if kind == "error":
        return ("error", tuple(p4info.type_info.error.members))
    if kind == "enum":
        return ("enum", tuple(m.name for m in p4info.type_info.enums[spec.enum.name].members))
    if kind == "serializable_enum":
        return p4info.type_info.serializable_enums[spec.serializable_enum.name].underlying_type.bitwidth
    return None


class Schema:
    """Id -> description for every object kind of one P4Info."""

    def __init__(self, p4info: P4I.P4Info) -> None:
        self.p4info = p4info
        self.actions: dict[int, ActionInfo] = {}
        for a in p4info.actions:
            params = tuple(ParamInfo(id=p.id, name=p.name, bitwidth=p.bitwidth) for p in a.params)
            self.actions[a.preamble.id] = ActionInfo(id=a.preamble.id, name=a.preamble.name,
                                                     params=params, by_id={p.id: p for p in params})
        self.action_ids = {a.name: a.id for a in self.actions.values()}
        self.direct_counters = {c.preamble.id: ArrayInfo(id=c.preamble.id, name=c.preamble.name, size=0,
                                                         unit=c.spec.unit, table_id=c.direct_table_id)
                                for c in p4info.direct_counters}
        self.direct_meters = {m.preamble.id: ArrayInfo(id=m.preamble.id, name=m.preamble.name, size=0,
                                                       unit=m.spec.unit, table_id=m.direct_table_id)
                              for m in p4info.direct_meters}
        self.tables: dict[int, TableInfo] = {}
        for t in p4info.tables:
            fields = tuple(MatchFieldInfo(id=f.id, name=f.name, bitwidth=f.bitwidth,
                                          kind=MATCH_KIND.get(f.match_type, f.other_match_type or "unspecified"))
                           for f in t.match_fields)
            info = TableInfo(id=t.preamble.id, name=t.preamble.name, fields=fields,
                             by_id={f.id: f for f in fields},
                             actions={r.id: r.scope for r in t.action_refs},
                             const_default_action_id=t.const_default_action_id,
                             is_const=t.is_const_table, size=t.size,
                             implementation_id=t.implementation_id)
            for rid in t.direct_resource_ids:
                if rid in self.direct_counters:
                    info.direct_counter_id = rid
                elif rid in self.direct_meters:
                    info.direct_meter_id = rid
            self.tables[info.id] = info
        self.counters = {c.preamble.id: ArrayInfo(id=c.preamble.id, name=c.preamble.name, size=c.size,
                                                  unit=c.spec.unit) for c in p4info.counters}
        self.meters = {m.preamble.id: ArrayInfo(id=m.preamble.id, name=m.preamble.name, size=m.size,
                                                unit=m.spec.unit) for m in p4info.meters}
        self.registers = {r.preamble.id: ArrayInfo(id=r.preamble.id, name=r.preamble.name, size=r.size,
                                                   type_spec=r.type_spec) for r in p4info.registers}
        self.digests: dict[int, DigestInfo] = {}
        self.digest_by_name: dict[str, DigestInfo] = {}
        for d in p4info.digests:
            members: tuple[tuple[str, P4I.P4DataTypeSpec], ...] = ()
            if d.type_spec.WhichOneof("type_spec") == "struct":
                st = p4info.type_info.structs.get(d.type_spec.struct.name)
                if st is not None:
                    members = tuple((m.name, m.type_spec) for m in st.members)
            info_d = DigestInfo(id=d.preamble.id, name=d.preamble.name, members=members,
                                symbols=tuple(_member_symbols(p4info, spec) for _, spec in members))
            self.digests[info_d.id] = info_d
            self.digest_by_name[info_d.name] = info_d
        self.value_sets = {v.preamble.id: v.preamble.name for v in p4info.value_sets}
        self.value_set_fields = {
            v.preamble.id: tuple(MatchFieldInfo(id=f.id, name=f.name or f"field{f.id}", bitwidth=f.bitwidth,
                                                kind=MATCH_KIND.get(f.match_type, f.other_match_type or "exact"))
                                 for f in v.match)
            for v in p4info.value_sets}
        self.action_profiles = {a.preamble.id: a.preamble.name for a in p4info.action_profiles}

    # ------------------------------------------------------------- lookups
    def table(self, table_id: int, where: str = "table_entry") -> TableInfo:
        return _get(self.tables, table_id, "table", where)

    def action(self, action_id: int, where: str = "action") -> ActionInfo:
        return _get(self.actions, action_id, "action", where)

    def counter(self, counter_id: int) -> ArrayInfo:
        return _get(self.counters, counter_id, "counter", "counter_entry")

    def meter(self, meter_id: int) -> ArrayInfo:
        return _get(self.meters, meter_id, "meter", "meter_entry")

    def register(self, register_id: int) -> ArrayInfo:
        return _get(self.registers, register_id, "register", "register_entry")

    def action_profile(self, profile_id: int, where: str = "action profile entry") -> str:
        return _get(self.action_profiles, profile_id, "action profile", where)

    def value_set(self, value_set_id: int) -> str:
        return _get(self.value_sets, value_set_id, "value_set", "value_set_entry")

    def digest(self, digest_id: int) -> DigestInfo:
        return _get(self.digests, digest_id, "digest", "digest_entry")


def _get(objs: dict[int, V], obj_id: int, kind: str, where: str) -> V:
    if obj_id == 0:
        raise invalid(f"{where}: {kind} id 0 is not valid here")
    obj = objs.get(obj_id)
    if obj is None:
        # PI/BMv2 answer an unknown P4 id with INVALID_ARGUMENT
        raise invalid(f"{where}: no {kind} with id {obj_id} ({obj_id:#x}) in the P4Info")
    return obj


__all__ = ["ActionInfo", "ArrayInfo", "DigestInfo", "MatchFieldInfo", "P4RuntimeError", "ParamInfo",
           "Schema", "TableInfo"]
