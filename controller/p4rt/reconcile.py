"""Idempotent reconciliation: from what a switch holds and what it should hold, the
smallest list of updates (pure functions, no I/O).

Why: a controller restart, a switch restart and a topology change all become the
same operation — read, diff, write the difference — and running it twice writes
nothing the second time.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2 as P

from .entries import entry_key, entry_value


@dataclass(slots=True, kw_only=True)
class Plan:
    """Updates in the order they are written: deletes, modifies, inserts."""

    deletes: list[P.Update] = field(default_factory=list)
    modifies: list[P.Update] = field(default_factory=list)
    inserts: list[P.Update] = field(default_factory=list)

    @property
    def updates(self) -> list[P.Update]:
        return self.deletes + self.modifies + self.inserts

    def __len__(self) -> int:
        return len(self.deletes) + len(self.modifies) + len(self.inserts)

    def summary(self) -> str:
        return f"{len(self.inserts)} insert(s), {len(self.modifies)} modify, {len(self.deletes)} delete(s)"


def _update(utype: int, te: P.TableEntry) -> P.Update:
    u = P.Update(type=utype)
    u.entity.table_entry.CopyFrom(te)
    return u


def plan_table_entries(desired: Iterable[P.TableEntry], actual: Iterable[P.TableEntry], *,
                       managed_tables: set[int] | None = None) -> Plan:
    """Diff of non-default entries; entries of tables outside `managed_tables` are left alone."""
    want = {entry_key(te): te for te in desired if not te.is_default_action}
    have = {entry_key(te): te for te in actual if not te.is_default_action}
    plan = Plan()
    for key, te in have.items():
        if key not in want and (managed_tables is None or te.table_id in managed_tables):
            d = P.TableEntry()
            d.CopyFrom(te)
            d.ClearField("action")
            d.ClearField("counter_data")
            d.ClearField("meter_config")
            plan.deletes.append(_update(P.Update.DELETE, d))
    for key, te in want.items():
        if key not in have:
            plan.inserts.append(_update(P.Update.INSERT, te))
        elif entry_value(have[key]) != entry_value(te):
            plan.modifies.append(_update(P.Update.MODIFY, te))
    return plan


def plan_default_entries(desired: Iterable[P.TableEntry], actual: dict[int, P.TableEntry]) -> Plan:
    """MODIFY for each default action that differs from the one the switch reports."""
    plan = Plan()
    for te in desired:
        cur = actual.get(te.table_id)
        if cur is None or entry_value(cur) != entry_value(te):
            plan.modifies.append(_update(P.Update.MODIFY, te))
    return plan


def plan_clone_sessions(desired: Iterable[P.PacketReplicationEngineEntry],
                        actual: Iterable[P.PacketReplicationEngineEntry]) -> Plan:
    """Clone sessions by session id: insert, modify (replicas differ) or delete."""
    def norm(pre: P.PacketReplicationEngineEntry) -> bytes:
        c = P.CloneSessionEntry()
        c.CopyFrom(pre.clone_session_entry)
        reps = sorted((r.egress_port, r.instance) for r in c.replicas)
        del c.replicas[:]
        for port, inst in reps:
            c.replicas.add(egress_port=port, instance=inst)
        return c.SerializeToString(deterministic=True)

    want = {p.clone_session_entry.session_id: p for p in desired}
    have = {p.clone_session_entry.session_id: p for p in actual}
    plan = Plan()

    def upd(utype: int, pre: P.PacketReplicationEngineEntry) -> P.Update:
        u = P.Update(type=utype)
        u.entity.packet_replication_engine_entry.CopyFrom(pre)
        return u

    for sid, pre in have.items():
        if sid not in want:
            d = P.PacketReplicationEngineEntry()
            d.clone_session_entry.session_id = sid
            plan.deletes.append(upd(P.Update.DELETE, d))
    for sid, pre in want.items():
        if sid not in have:
            plan.inserts.append(upd(P.Update.INSERT, pre))
        elif norm(have[sid]) != norm(pre):
            plan.modifies.append(upd(P.Update.MODIFY, pre))
    return plan
