"""Table entries and clone sessions as plain data, and their P4Runtime protobufs.

Why a data form: intent computes entries without a switch or a P4Info at hand; the
schema turns them into protobufs at the edge, and reads come back through the same
codec, so "what the switch holds" and "what we want" compare as equal keys.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4runtime_pb2 as P

from .codec import (
    decode_bits,
    decode_match,
    encode_bits,
    encode_match,
    format_match,
    format_value,
    parse_value,
)
from .errors import CodecError, SchemaError
from .schema import Schema


@dataclass(slots=True, frozen=True, kw_only=True)
class TableEntry:
    """One entry (or, with `is_default`, a table's default action) by names.

    `match` maps field name -> value in any form `codec` accepts; `params` maps
    parameter name -> value.  Frozen and built from tuples so it can be hashed.
    """

    table: str
    match: tuple[tuple[str, Any], ...] = ()
    action: str = ""
    params: tuple[tuple[str, Any], ...] = ()
    priority: int = 0
    is_default: bool = False

    @classmethod
    def make(cls, table: str, match: Mapping[str, Any] | None = None, action: str = "",
             params: Mapping[str, Any] | None = None, *, priority: int = 0,
             is_default: bool = False) -> TableEntry:
        return cls(table=table, match=tuple((match or {}).items()), action=action,
                   params=tuple((params or {}).items()), priority=priority, is_default=is_default)


@dataclass(slots=True, frozen=True, kw_only=True)
class CloneSession:
    """A PRE clone session: copies go to `replicas` (egress port, instance) pairs."""

    session_id: int
    replicas: tuple[tuple[int, int], ...]
    class_of_service: int = 0
    packet_length_bytes: int = 0


def entry_to_proto(schema: Schema, e: TableEntry) -> P.TableEntry:
    """The protobuf of `e` in canonical form (don't-care fields left out)."""
    t = schema.table(e.table)
    where = f"table {t.name}"
    te = P.TableEntry(table_id=t.id)
    if e.is_default:
        if e.match:
            raise CodecError(f"{where}: a default action entry has no match fields (got {dict(e.match)})")
        te.is_default_action = True
    seen: set[str] = set()
    for name, value in e.match:
        mf = t.field(name)
        if name in seen:
            raise CodecError(f"{where}: match field {name!r} given twice")
        seen.add(name)
        fm = encode_match(mf, value, where)
        if fm is not None:
            te.match.append(fm)
    te.match.sort(key=lambda f: f.field_id)
    if t.needs_priority and not e.is_default:
        if e.priority <= 0:
            raise CodecError(f"{where}: entry {format_entry_spec(e)} needs a priority > 0 "
                             f"(ternary/range/optional table)")
        te.priority = e.priority
    elif e.priority:
        raise CodecError(f"{where}: priority {e.priority} given for a table without ternary, "
                         f"range or optional fields")
    if e.action:
        a = schema.action(e.action)
        schema.check_action_of(t, a)
        given = dict(e.params)
        missing = [p.name for p in a.params if p.name not in given]
        if missing:
            raise CodecError(f"{where}: action {a.name} misses parameter(s) {missing}")
        for pname in given:
            a.param(pname)  # unknown names -> SchemaError with a suggestion
        act = te.action.action
        act.action_id = a.id
        for p in a.params:
            pw = f"{where} action {a.name} parameter {p.name!r}"
            act.params.append(P.Action.Param(param_id=p.id, value=encode_bits(
                parse_value(given[p.name], p.bitwidth, pw), p.bitwidth, pw)))
    elif not e.is_default:
        raise CodecError(f"{where}: entry {format_entry_spec(e)} has no action")
    return te


def entry_from_proto(schema: Schema, te: P.TableEntry) -> TableEntry:
    """The data form of an entry read from a switch (values as canonical ints/tuples)."""
    t = schema.table_by_id(te.table_id)
    where = f"table {t.name}"
    match = tuple((t.field_by_id(fm.field_id).name, decode_match(t.field_by_id(fm.field_id), fm, where))
                  for fm in sorted(te.match, key=lambda f: f.field_id))
    action = ""
    params: tuple[tuple[str, Any], ...] = ()
    if te.action.WhichOneof("type") == "action":
        a = schema.action_by_id(te.action.action.action_id)
        action = a.name
        params = tuple((a.param_by_id(p.param_id).name,
                        decode_bits(p.value, a.param_by_id(p.param_id).bitwidth, where))
                       for p in te.action.action.params)
    return TableEntry(table=t.name, match=match, action=action, params=params,
                      priority=te.priority, is_default=te.is_default_action)


def entry_key(te: P.TableEntry) -> bytes:
    """What identifies an entry on a switch: table, match (canonical, sorted), priority."""
    k = P.TableEntry(table_id=te.table_id, priority=te.priority, is_default_action=te.is_default_action)
    k.match.extend(sorted(te.match, key=lambda f: f.field_id))
    return k.SerializeToString(deterministic=True)


def entry_value(te: P.TableEntry) -> bytes:
    """What an entry does: its action and canonical parameters (compared by reconciliation)."""
    a = P.TableAction()
    a.CopyFrom(te.action)
    if a.WhichOneof("type") == "action":
        params = sorted(a.action.params, key=lambda p: p.param_id)
        for p in params:
            p.value = p.value.lstrip(b"\x00") or b"\x00"
        del a.action.params[:]
        a.action.params.extend(params)
    return a.SerializeToString(deterministic=True)


def format_entry(schema: Schema, te: P.TableEntry) -> str:
    """One line: 'SwitchIngress.ipv4_lpm dst_addr=10.0.1.0/24 -> ipv4_forward(port=1, ...)'."""
    try:
        t = schema.table_by_id(te.table_id)
        parts = [t.name + (" (default)" if te.is_default_action else "")]
        for fm in sorted(te.match, key=lambda f: f.field_id):
            mf = t.field_by_id(fm.field_id)
            parts.append(f"{mf.name}={format_match(mf, decode_match(mf, fm))}")
        if te.priority:
            parts.append(f"priority={te.priority}")
        if te.action.WhichOneof("type") == "action":
            a = schema.action_by_id(te.action.action.action_id)
            args = []
            for p in te.action.action.params:
                pi = a.param_by_id(p.param_id)
                args.append(f"{pi.name}={format_value(int.from_bytes(p.value, 'big'), pi.bitwidth, pi.name)}")
            parts.append(f"-> {a.name}({', '.join(args)})")
        return " ".join(parts)
    except (SchemaError, CodecError) as exc:
        return f"table_id={te.table_id} <unformattable: {exc}>"


def format_entry_spec(e: TableEntry) -> str:
    m = " ".join(f"{k}={v}" for k, v in e.match)
    p = ", ".join(f"{k}={v}" for k, v in e.params)
    return f"{e.table}{' (default)' if e.is_default else ''} {m} -> {e.action}({p})".replace("  ", " ")


def clone_session_to_proto(cs: CloneSession) -> P.PacketReplicationEngineEntry:
    pre = P.PacketReplicationEngineEntry()
    c = pre.clone_session_entry
    c.session_id = cs.session_id
    c.class_of_service = cs.class_of_service
    c.packet_length_bytes = cs.packet_length_bytes
    for port, instance in cs.replicas:
        r = c.replicas.add()
        r.egress_port = port
        r.instance = instance
    return pre


def clone_session_from_proto(pre: P.PacketReplicationEngineEntry) -> CloneSession:
    c = pre.clone_session_entry
    return CloneSession(session_id=c.session_id, replicas=tuple((r.egress_port, r.instance) for r in c.replicas),
                        class_of_service=c.class_of_service, packet_length_bytes=c.packet_length_bytes)


@dataclass(slots=True, kw_only=True)
class DesiredState:
    """Everything one switch should hold: table entries, default actions, clone sessions."""

    entries: list[TableEntry] = field(default_factory=list)
    clone_sessions: list[CloneSession] = field(default_factory=list)
