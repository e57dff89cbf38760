"""P4Info as a typed schema: names <-> ids for every object the controller touches.

Why: entries are written with readable names ("SwitchIngress.ipv4_lpm", "dst_addr");
the wire wants ids.  The P4Info is read once into the index shared with the switch's
server (:mod:`common.p4runtime.p4info`); this module adds the client's lookups by
name or alias, which turn an unknown name into an error with the closest known one.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import TypeVar

from p4.config.v1 import p4info_pb2 as P4I

from common.p4runtime.p4info import (
    ActionInfo,
    ArrayInfo,
    DigestInfo,
    MatchFieldInfo,
    MatchKind,
    P4InfoIndex,
    PacketMetadataInfo,
    ParamInfo,
    TableInfo,
)

from .errors import SchemaError, did_you_mean

__all__ = ["ActionInfo", "ArrayInfo", "ClientActionInfo", "ClientTableInfo", "DigestInfo",
           "MatchFieldInfo", "MatchKind", "PacketMetadataInfo", "ParamInfo", "Schema", "TableInfo"]


_Named = TypeVar("_Named", ParamInfo, MatchFieldInfo)


def _named(items: tuple[_Named, ...], name: str, missing: str, plural: str) -> _Named:
    """The item called ``name``, or a SchemaError naming the closest one and all."""
    for item in items:
        if item.name == name:
            return item
    names = [i.name for i in items]
    raise SchemaError(f"{missing} {name!r}{did_you_mean(name, names)}; {plural}: {names}")


class ClientActionInfo(ActionInfo):
    """An action with lookups of its parameters that name the closest known one."""

    __slots__ = ()

    def param(self, name: str) -> ParamInfo:
        return _named(self.params, name, f"action {self.name}: no parameter", "parameters")

    def param_by_id(self, pid: int) -> ParamInfo:
        p = self.params_by_id.get(pid)
        if p is None:
            raise SchemaError(f"action {self.name}: no parameter id {pid}")
        return p


class ClientTableInfo(TableInfo):
    """A table with lookups of its match fields that name the closest known one."""

    __slots__ = ()

    def field(self, name: str) -> MatchFieldInfo:
        return _named(self.match_fields, name, f"table {self.name}: no match field", "fields")

    def field_by_id(self, fid: int) -> MatchFieldInfo:
        m = self.fields_by_id.get(fid)
        if m is None:
            raise SchemaError(f"table {self.name}: no match field id {fid}")
        return m


class Schema(P4InfoIndex):
    """Everything of one P4Info the client needs, looked up by name, alias or id."""

    table_info = ClientTableInfo
    action_info = ClientActionInfo

    def __init__(self, p4info: P4I.P4Info) -> None:
        for t in p4info.tables:
            for m in t.match_fields:
                if m.match_type not in (P4I.MatchField.EXACT, P4I.MatchField.LPM, P4I.MatchField.TERNARY,
                                        P4I.MatchField.RANGE, P4I.MatchField.OPTIONAL):
                    kind = m.other_match_type or f"match type {m.match_type}"
                    raise SchemaError(f"table {t.preamble.name}: match field {m.name!r} has match kind "
                                      f"{kind!r}, which this client does not support")
        super().__init__(p4info)
        self._ids: dict[int, TableInfo | ActionInfo | ArrayInfo | DigestInfo] = {
            **self.tables, **self.actions, **self.counters, **self.meters, **self.registers,
            **self.digests}

    @classmethod
    def from_p4info(cls, p4info: P4I.P4Info) -> Schema:
        return cls(p4info)

    def _lookup(self, kind: str, objs: dict, name: str):  # type: ignore[no-untyped-def,type-arg]
        names = self.by_name.get(kind, {})
        oid = names.get(name)
        if oid is None:
            raise SchemaError(f"P4Info has no {kind} {name!r}{did_you_mean(name, list(names))}")
        return objs[oid]

    def table(self, name: str) -> ClientTableInfo:
        return self._lookup("table", self.tables, name)  # type: ignore[no-any-return]

    def action(self, name: str) -> ClientActionInfo:
        return self._lookup("action", self.actions, name)  # type: ignore[no-any-return]

    def counter(self, name: str) -> ArrayInfo:
        return self._lookup("counter", self.counters, name)  # type: ignore[no-any-return]

    def register(self, name: str) -> ArrayInfo:
        return self._lookup("register", self.registers, name)  # type: ignore[no-any-return]

    def digest(self, name: str) -> DigestInfo:
        return self._lookup("digest", self.digests, name)  # type: ignore[no-any-return]

    def by_id(self, oid: int) -> TableInfo | ActionInfo | ArrayInfo | DigestInfo:
        try:
            return self._ids[oid]
        except KeyError:
            raise SchemaError(f"P4Info has no object with id {oid} (0x{oid:08x})") from None

    def table_by_id(self, oid: int) -> ClientTableInfo:
        obj = self.by_id(oid)
        if not isinstance(obj, ClientTableInfo):
            raise SchemaError(f"id {oid} (0x{oid:08x}) is {obj.name!r}, not a table")
        return obj

    def action_by_id(self, oid: int) -> ClientActionInfo:
        obj = self.by_id(oid)
        if not isinstance(obj, ClientActionInfo):
            raise SchemaError(f"id {oid} (0x{oid:08x}) is {obj.name!r}, not an action")
        return obj

    def table_actions(self, table: TableInfo) -> Iterator[ClientActionInfo]:
        for aid in table.action_ids:
            yield self.action_by_id(aid)

    def check_action_of(self, table: TableInfo, action: ActionInfo) -> None:
        if action.id not in table.actions:
            names = [a.name for a in self.table_actions(table)]
            raise SchemaError(f"table {table.name}: action {action.name!r} is not one of its actions "
                              f"{names}{did_you_mean(action.name, names)}")
