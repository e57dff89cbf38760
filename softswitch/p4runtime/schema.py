"""The switch's view of a P4Info: the shared index (:mod:`common.p4runtime.p4info`)
with lookups by id that refuse an unknown or zero id with INVALID_ARGUMENT, as
PI/BMv2 do."""
from __future__ import annotations

from typing import TypeVar

from p4.config.v1 import p4info_pb2 as P4I

from common.p4runtime.p4info import (
    ActionInfo,
    ArrayInfo,
    DigestInfo,
    MatchFieldInfo,
    P4InfoIndex,
    ParamInfo,
    TableInfo,
)
from softswitch.p4runtime.errors import P4RuntimeError, invalid

V = TypeVar("V")


class Schema(P4InfoIndex):
    """Id -> description for every object kind of one P4Info."""

    def __init__(self, p4info: P4I.P4Info) -> None:
        super().__init__(p4info)
        self.action_ids = {a.name: a.id for a in self.actions.values()}
        self.digest_by_name = {d.name: d for d in self.digests.values()}

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
