"""TableEntry updates and reads: P4Runtime match/action messages <-> runtime table entries.

Why the checks live here and not in the runtime tables: they are P4Runtime's own
rules about the *encoding* (a don't-care must be omitted, an LPM prefix length of
0 or a ternary mask of 0 or a full range is refused, exact fields are mandatory,
priority only for ternary/range/optional tables), applied before the runtime API
sees the entry, so nothing is changed when they fail.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P

from common.p4runtime.p4info import ActionInfo
from softswitch.errors import RuntimeApiError
from softswitch.externs.stateful import MeterConfig
from softswitch.p4runtime.codec import decode_bits, encode_bits
from softswitch.p4runtime.errors import P4RuntimeError, invalid, unimplemented
from softswitch.p4runtime.schema import TableInfo
from softswitch.p4runtime.state import PipelineState
from softswitch.tables import Exact, Lpm, MatchValue, Optional, Range, Table, TableEntry, Ternary

Key = list[MatchValue]


# --------------------------------------------------------------------- match
def decode_match(t: TableInfo, entry: P.TableEntry) -> Key:
    """The runtime key (one MatchValue per P4Info field, in field order)."""
    given: dict[int, P.FieldMatch] = {}
    for fm in entry.match:
        if fm.field_id not in t.fields_by_id:
            raise invalid(f"table {t.name}: no match field with id {fm.field_id} "
                          f"(have {[f'{f.id}={f.name}' for f in t.match_fields]})")
        if fm.field_id in given:
            raise invalid(f"table {t.name}: match field {t.fields_by_id[fm.field_id].name} given twice")
        given[fm.field_id] = fm
    key: Key = []
    for f in t.match_fields:
        where = f"table {t.name}: match field {f.name} ({f.kind}, bit<{f.bitwidth}>)"
        fm = given.get(f.id)
        full = (1 << f.bitwidth) - 1
        if fm is None:
            if f.kind == "exact":
                raise invalid(f"{where}: exact match fields cannot be omitted")
            key.append(_wildcard(f.kind, full, where))
            continue
        kind = fm.WhichOneof("field_match_type")
        if kind != f.kind:
            raise invalid(f"{where}: got a {kind or 'empty'} match")
        if kind == "exact":
            key.append(Exact(decode_bits(fm.exact.value, f.bitwidth, where)))
        elif kind == "lpm":
            plen = fm.lpm.prefix_len
            if plen <= 0 or plen > f.bitwidth:
                raise invalid(f"{where}: prefix length {plen} outside 1..{f.bitwidth} "
                              f"(a don't-care LPM field must be omitted)")
            v = decode_bits(fm.lpm.value, f.bitwidth, where)
            mask = ((1 << plen) - 1) << (f.bitwidth - plen)
            if v & ~mask:
                raise invalid(f"{where}: value {v:#x} has bits set beyond prefix length {plen}")
            key.append(Lpm(v, plen))
        elif kind == "ternary":
            v = decode_bits(fm.ternary.value, f.bitwidth, where)
            m = decode_bits(fm.ternary.mask, f.bitwidth, where)
            if m == 0:
                raise invalid(f"{where}: mask 0 (a don't-care ternary field must be omitted)")
            if v & ~m:
                raise invalid(f"{where}: value {v:#x} has bits outside mask {m:#x}")
            key.append(Ternary(v, m))
        elif kind == "range":
            lo = decode_bits(fm.range.low, f.bitwidth, where)
            hi = decode_bits(fm.range.high, f.bitwidth, where)
            if lo > hi:
                raise invalid(f"{where}: low {lo:#x} > high {hi:#x}")
            if lo == 0 and hi == full:
                raise invalid(f"{where}: the full range (a don't-care range field must be omitted)")
            key.append(Range(lo, hi))
        elif kind == "optional":
            key.append(Optional(decode_bits(fm.optional.value, f.bitwidth, where)))
        else:
            raise _unsupported_kind(where)
    return key


def _wildcard(kind: str, full: int, where: str) -> MatchValue:
    """The match value of an omitted (don't-care) field."""
    if kind == "lpm":
        return Lpm(0, 0)
    if kind == "ternary":
        return Ternary(0, 0)
    if kind == "range":
        return Range(0, full)
    if kind == "optional":
        return Optional(None)
    raise _unsupported_kind(where)


def _unsupported_kind(where: str) -> P4RuntimeError:
    return unimplemented(f"{where}: this match kind is not supported over P4Runtime")


def encode_match(t: TableInfo, key: tuple[MatchValue, ...], out: Any) -> None:
    """Append the FieldMatch messages of `key` to the repeated field `out` (don't-cares omitted)."""
    for f, m in zip(t.match_fields, key):
        if isinstance(m, Exact):
            out.add(field_id=f.id).exact.value = encode_bits(m.value)
        elif isinstance(m, Lpm):
            if m.prefix_len:
                lpm = out.add(field_id=f.id).lpm
                lpm.value, lpm.prefix_len = encode_bits(m.value), m.prefix_len
        elif isinstance(m, Ternary):
            if m.mask:
                tern = out.add(field_id=f.id).ternary
                tern.value, tern.mask = encode_bits(m.value), encode_bits(m.mask)
        elif isinstance(m, Range):
            if m.low or m.high != (1 << f.bitwidth) - 1:
                rng = out.add(field_id=f.id).range
                rng.low, rng.high = encode_bits(m.low), encode_bits(m.high)
        elif isinstance(m, Optional) and m.value is not None:
            out.add(field_id=f.id).optional.value = encode_bits(m.value)


def check_priority(t: TableInfo, rt: Table, priority: int) -> int:
    if rt.needs_priority:
        if priority <= 0:
            raise invalid(f"table {t.name}: entries of a table with ternary/range/optional fields "
                          f"need a priority > 0, got {priority}")
    elif priority != 0:
        raise invalid(f"table {t.name}: priority {priority} given, but the table has no "
                      f"ternary/range/optional field (priority must be 0)")
    return priority


# -------------------------------------------------------------------- action
def decode_action(st: PipelineState, t: TableInfo, entry: P.TableEntry, *, for_default: bool
                  ) -> tuple[str, list[int]]:
    ta = entry.action
    kind = ta.WhichOneof("type")
    if kind == "action_profile_action_set":
        raise unimplemented(f"table {t.name}: one-shot action selector programming "
                            f"(action_profile_action_set) is not supported; write members and groups")
    if kind in ("action_profile_member_id", "action_profile_group_id"):
        raise invalid(f"table {t.name}: {kind} given, but the table has no action profile")
    if t.implementation_id:
        raise invalid(f"table {t.name}: an indirect table's entries name an action profile member or "
                      f"group, not an action")
    if kind != "action":
        raise invalid(f"table {t.name}: the entry has no action")
    a = ta.action
    info = st.schema.action(a.action_id, f"table {t.name}")
    scope = t.actions.get(a.action_id)
    if scope is None:
        raise invalid(f"table {t.name}: action {info.name} is not one of the table's actions")
    if for_default and scope == P4I.ActionRef.TABLE_ONLY:
        raise invalid(f"table {t.name}: action {info.name} is @tableonly and cannot be the default")
    if not for_default and scope == P4I.ActionRef.DEFAULT_ONLY:
        raise invalid(f"table {t.name}: action {info.name} is @defaultonly and cannot be in an entry")
    return info.name, decode_params(info, a, f"action {info.name}")


def decode_params(info: ActionInfo, a: P.Action, what: str) -> list[int]:
    """The values of action `a`'s parameters in the action's order, each given once and
    fitting its width (a table entry's action, an action profile member's); `what`
    names the action in the errors."""
    given: dict[int, bytes] = {}
    for p in a.params:
        if p.param_id not in info.params_by_id:
            raise invalid(f"{what}: no parameter with id {p.param_id}")
        if p.param_id in given:
            raise invalid(f"{what}: parameter {info.params_by_id[p.param_id].name} given twice")
        given[p.param_id] = p.value
    args = []
    for prm in info.params:
        if prm.id not in given:
            raise invalid(f"{what}: parameter {prm.name} (id {prm.id}) is missing")
        args.append(decode_bits(given[prm.id], prm.bitwidth, f"{what} parameter {prm.name}"))
    return args


def encode_action(st: PipelineState, name: str, args: tuple[int, ...], out: P.Action) -> None:
    """Fill `out` with action `name` and its parameter values."""
    aid = st.schema.action_ids.get(name, 0)
    out.action_id = aid
    info = st.schema.actions.get(aid)
    params = out.params
    for prm, v in zip(info.params if info else (), args):
        params.add(param_id=prm.id, value=encode_bits(v))


def meter_config_of(cfg: P.MeterConfig, where: str) -> MeterConfig:
    mc = MeterConfig(cir=cfg.cir, cburst=cfg.cburst, pir=cfg.pir, pburst=cfg.pburst)
    try:
        mc.check(where)
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None
    return mc


# --------------------------------------------------------------------- write
def write_table_entry(st: PipelineState, utype: int, entry: P.TableEntry) -> None:
    t = st.schema.table(entry.table_id)
    rt = st.runtime_table(t)
    if entry.is_default_action:
        _write_default(st, t, rt, utype, entry)
        return
    if t.is_const or rt.entries_const:
        raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                             f"table {t.name}: the table is const (its entries are fixed by the program)")
    if entry.idle_timeout_ns:
        raise unimplemented(f"table {t.name}: idle timeout (idle_timeout_ns) is not supported")
    key = decode_match(t, entry)
    prio = check_priority(t, rt, entry.priority)
    if entry.HasField("counter_data"):
        if not t.direct_counter_id:
            raise invalid(f"table {t.name}: counter_data given, but the table has no direct counter")
        if entry.counter_data.packet_count < 0 or entry.counter_data.byte_count < 0:
            raise invalid(f"table {t.name}: negative counter_data")
    meter = None
    if entry.HasField("meter_config"):
        if not t.direct_meter_id:
            raise invalid(f"table {t.name}: meter_config given, but the table has no direct meter")
        meter = meter_config_of(entry.meter_config, f"table {t.name} meter_config")
    try:
        indirect = _indirect_target(t, entry) if utype != P.Update.DELETE else None
        if indirect is not None:
            member, group = indirect
            if utype == P.Update.INSERT:
                e = rt.insert_indirect(key, member=member, group=group, priority=prio)
            else:
                e = rt.modify_indirect(key, member=member, group=group, priority=prio)
        elif utype == P.Update.INSERT:
            action, args = decode_action(st, t, entry, for_default=False)
            e = rt.insert(key, action, args, prio)
        elif utype == P.Update.MODIFY:
            action, args = decode_action(st, t, entry, for_default=False)
            e = rt.modify(key, action, args, prio)
        elif utype == P.Update.DELETE:
            e = rt.delete(key, prio)
            st.entry_extras.pop((rt.name, e.handle), None)
            return
        else:
            raise invalid(f"table {t.name}: update type {utype} is not INSERT, MODIFY or DELETE")
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None
    if entry.HasField("counter_data"):
        rt.set_entry_counters(e, entry.counter_data.packet_count, entry.counter_data.byte_count)
    if meter is not None:
        rt.set_entry_meter(e, meter)
    if entry.controller_metadata or entry.metadata:
        st.entry_extras[(rt.name, e.handle)] = (entry.controller_metadata, entry.metadata)
    else:
        st.entry_extras.pop((rt.name, e.handle), None)


def _indirect_target(t: TableInfo, entry: P.TableEntry) -> tuple[int | None, int | None] | None:
    """(member, group) when the entry names an action profile member or group, else None."""
    kind = entry.action.WhichOneof("type")
    if kind not in ("action_profile_member_id", "action_profile_group_id"):
        return None
    if not t.implementation_id:
        raise invalid(f"table {t.name}: {kind} given, but the table has no action profile")
    if kind == "action_profile_member_id":
        return entry.action.action_profile_member_id, None
    return None, entry.action.action_profile_group_id


def _write_default(st: PipelineState, t: TableInfo, rt: Table, utype: int, entry: P.TableEntry) -> None:
    if utype != P.Update.MODIFY:
        raise invalid(f"table {t.name}: the default entry can only be modified (got "
                      f"{P.Update.Type.Name(utype)})")
    if len(entry.match) or entry.priority:
        raise invalid(f"table {t.name}: a default entry has no match fields and no priority")
    if t.const_default_action_id or rt.default_const:
        raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                             f"table {t.name}: the default action is const")
    if entry.HasField("counter_data") or entry.HasField("meter_config"):
        raise unimplemented(f"table {t.name}: direct counters/meters of the default entry")
    if entry.HasField("action"):
        action, args = decode_action(st, t, entry, for_default=True)
    else:  # an empty action resets the program's default
        action, args = st.initial_defaults[rt.name][0], list(st.initial_defaults[rt.name][1])
    try:
        rt.set_default(action, args)
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


# ---------------------------------------------------------------------- read
def find_entry(st: PipelineState, t: TableInfo, rt: Table, entry: P.TableEntry) -> TableEntry:
    key = decode_match(t, entry)
    try:
        return rt.find(key, check_priority(t, rt, entry.priority))
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def encode_entry(st: PipelineState, t: TableInfo, rt: Table, e: TableEntry, *,
                 counter: bool, meter: bool, out: P.TableEntry | None = None) -> P.TableEntry:
    """Entry `e` as a TableEntry, filled into `out` when given (no copies: protobuf is slow)."""
    if out is None:
        out = P.TableEntry()
    out.table_id = t.id
    if e.priority:
        out.priority = e.priority
    encode_match(t, e.key, out.match)
    if e.member is not None:
        out.action.action_profile_member_id = e.member
    elif e.group is not None:
        out.action.action_profile_group_id = e.group
    else:
        encode_action(st, e.action, e.args, out.action.action)
    extras = st.entry_extras.get((rt.name, e.handle))
    if extras:
        out.controller_metadata, out.metadata = extras
    if e.is_const:
        out.is_const = True
    if counter and t.direct_counter_id:
        out.counter_data.packet_count, out.counter_data.byte_count = e.packets, e.bytes
    if meter and t.direct_meter_id and e.meter_config is not None:
        c = e.meter_config
        out.meter_config.cir, out.meter_config.cburst = c.cir, c.cburst
        out.meter_config.pir, out.meter_config.pburst = c.pir, c.pburst
    return out


def read_table_entries(st: PipelineState, query: P.TableEntry, new: Callable[[], P.TableEntry]) -> None:
    """Fill a message from `new()` per entry matching `query`: table id 0 = every table,
    no match fields = every entry, is_default_action = the default entry."""
    counter, meter = query.HasField("counter_data"), query.HasField("meter_config")
    if query.table_id == 0:
        if len(query.match) or query.is_default_action:
            raise invalid("table_entry read: match fields or is_default_action need a table id")
        tables = list(st.schema.tables.values())
    else:
        tables = [st.schema.table(query.table_id)]
    for t in tables:
        rt = st.runtime_table(t)
        if query.is_default_action:
            d = rt.default
            out = new()
            out.table_id, out.is_default_action = t.id, True
            encode_action(st, d.action, d.args, out.action.action)
            continue
        if len(query.match):
            try:
                e = find_entry(st, t, rt, query)
            except P4RuntimeError as exc:
                if exc.code == grpc.StatusCode.NOT_FOUND:
                    continue  # reading an absent entry returns nothing
                raise
            encode_entry(st, t, rt, e, counter=counter, meter=meter, out=new())
            continue
        for e in rt.entries():
            if query.priority and e.priority != query.priority:
                continue
            encode_entry(st, t, rt, e, counter=counter, meter=meter, out=new())
