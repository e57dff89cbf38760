"""RECONCILE_AND_COMMIT: carry forwarding state from a running switch to its replacement.

Why replay through the runtime API: the new program may differ (an added table, a
wider counter), so state moves object by object, by P4Info name, and every entry is
validated by the new tables exactly as a fresh write would be. The new switch is
not live yet, so a failure leaves the running one untouched; the caller then
refuses the whole pipeline change (the P4Runtime spec asks for all or nothing).
"""
from __future__ import annotations

import copy
from typing import Any

from softswitch.errors import RuntimeApiError
from softswitch.p4runtime.errors import DeviceError


def carry_state(old: Any, new: Any) -> None:
    """Copy action profiles, entries, defaults, counters, meters, registers, value sets and
    PRE state of `old` into `new`.

    Objects only `old` has are dropped (the program no longer has them); objects with
    a different shape (size, width) raise `DeviceError` naming them.
    """
    op, np_ = old.program, new.program
    try:
        for name, p_old in getattr(op, "action_profiles", {}).items():
            p_new = np_.action_profiles.get(name)
            if p_new is None:
                continue
            for mid, m in p_old.members.items():
                p_new.member_add(mid, m.action, list(m.args))
            for gid, members in p_old.groups.items():
                p_new.group_add(gid, list(members), p_old.max_group_size.get(gid, 0))
        for name, t_old in op.tables.items():
            t_new = np_.tables.get(name)
            if t_new is None:
                continue
            if [(k.name, k.match_kind, k.width) for k in t_old.keys] != \
                    [(k.name, k.match_kind, k.width) for k in t_new.keys]:
                raise DeviceError(f"reconcile: table {name} changed its key; its entries cannot be kept")
            for e in t_old.entries():
                if e.is_const:
                    continue
                if e.member is not None or e.group is not None:
                    ne = t_new.insert_indirect(list(e.key), member=e.member, group=e.group,
                                               priority=e.priority)
                else:
                    ne = t_new.insert(list(e.key), e.action, list(e.args), e.priority)
                t_new.set_entry_counters(ne, e.packets, e.bytes)
                t_new.set_entry_meter(ne, copy.copy(e.meter_config))
            if not t_new.default_const and t_old.default.action in t_new.actions:
                t_new.set_default(t_old.default.action, list(t_old.default.args))
        # counters and registers through the runtime API: a kernel target reads its cells
        # for the old switch and writes them for the new one
        for name in op.counters:
            c_new = np_.counters.get(name)
            if c_new is not None:
                c_old = old.runtime.counter(name)
                _same_size("counter", name, c_old.size, c_new.size)
                for i, (p, b) in enumerate(zip(c_old.packets, c_old.bytes)):
                    if p or b:
                        new.runtime.counter_write(name, i, p, b)
        for name, m_old in op.meters.items():
            m_new = np_.meters.get(name)
            if m_new is not None:
                _same_size("meter", name, m_old.size, m_new.size)
                for i, cfg in enumerate(m_old.configs):
                    m_new.set_config(i, copy.copy(cfg))
        for name in op.registers:
            r_new = np_.registers.get(name)
            if r_new is not None:
                r_old = old.runtime.register(name)
                _same_size("register", name, r_old.size, r_new.size)
                if r_old.width != r_new.width:
                    raise DeviceError(f"reconcile: register {name} changed width "
                                      f"{r_old.width} -> {r_new.width}")
                for i, v in enumerate(r_old.cells):
                    if v:
                        new.runtime.register_write(name, i, v)
        for name, v_old in op.value_sets.items():
            v_new = np_.value_sets.get(name)
            if v_new is not None and v_new.width == v_old.width:
                for value, mask in v_old.members:
                    v_new.add(value, mask)
    except RuntimeApiError as exc:
        raise DeviceError(f"reconcile: cannot keep state: {exc}") from exc
    pre_old, pre_new = old.runtime.pre, new.runtime.pre
    try:      # through the API: a target keeps its own copy (the eBPF target's maps)
        for g, reps in pre_old.groups.items():
            pre_new.group_create(g, list(reps))
        for s in pre_old.sessions.values():
            pre_new.session_set(s.session, list(s.replicas), truncate=s.truncate,
                                class_of_service=s.class_of_service)
    except RuntimeApiError as exc:
        raise DeviceError(f"reconcile: cannot keep multicast groups and clone sessions: {exc}") from exc


def _same_size(kind: str, name: str, a: int, b: int) -> None:
    if a != b:
        raise DeviceError(f"reconcile: {kind} {name} changed size {a} -> {b}; its state cannot be kept")
