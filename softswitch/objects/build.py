"""`build_objects`: a program's run-time objects from its lowered form.

Everything is read from the lowering (names, table shapes, extern instances, value
sets) and the checked tree's calls (which digests the program sends); nothing here
knows how a target runs the program. The Python back end binds its generated action
functions into the tables made here (``ActionSpec.fn``); the eBPF target mirrors them.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from softswitch import tables as TB
from softswitch.action_profiles import ActionProfile
from softswitch.architecture import ExternOp, InstanceRequest
from softswitch.errors import CompileError
from softswitch.externs.stateful import (
    Counter,
    DigestQueue,
    DirectCounter,
    DirectMeter,
    Meter,
    Register,
    ValueSet,
)
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.frontend.walk import walk
from softswitch.lowering import LoweredAction, LoweredExtern, LoweredProgram, LoweredTable
from softswitch.objects.makers import instance_maker
from softswitch.objects.model import RuntimeObjects

# the object classes and where RuntimeObjects files each kind for the runtime API
_KINDS: tuple[tuple[type, Callable[[RuntimeObjects], dict[str, Any]]], ...] = (
    (Register, lambda o: o.registers), (Counter, lambda o: o.counters), (Meter, lambda o: o.meters),
    (DirectCounter, lambda o: o.direct_counters), (DirectMeter, lambda o: o.direct_meters),
    (ActionProfile, lambda o: o.action_profiles))


def program_objects(checked: Any, arch: Any = None) -> RuntimeObjects:
    """The run-time objects of checked program `checked` for `arch` (v1model when None):
    lowered, then built (what the eBPF target loads, what a P4Info is read from)."""
    from softswitch.lowering import lower_program
    from softswitch.v1model import V1MODEL
    return build_objects(lower_program(checked, arch or V1MODEL))


def build_objects(lowered: LoweredProgram) -> RuntimeObjects:
    """The run-time objects of `lowered` (its architecture makes the extern instances)."""
    objs = RuntimeObjects(checked=lowered.checked, arch=lowered.arch, lowered=lowered, tables={},
                          registers={}, counters={}, meters={}, direct_counters={}, direct_meters={},
                          digests={}, value_sets={}, action_profiles={}, actions={},
                          instances={})
    for ext in _used_externs(lowered):
        _file(objs, ext.name, make_extern(lowered, ext))
    for block in lowered.instances():
        for vs in block.value_sets:
            objs.value_sets[vs.name] = ValueSet(name=vs.name, size=vs.size, width=vs.width)
        for t in block.tables:
            objs.tables[t.name] = _table(objs, t)
    for a in _actions(lowered):
        objs.actions.setdefault(a.name, a.data_params)
    for name, fields in digest_types(lowered):
        objs.digests.setdefault(name, DigestQueue(name=name, field_names=fields))
    return objs


def make_extern(lowered: LoweredProgram, ext: LoweredExtern) -> Any:
    """The run-time object of one extern instance, made by its architecture."""
    arch = lowered.arch
    local = ext.decl.name if isinstance(ext.decl, A.InstantiationDecl) else ext.name
    make = instance_maker(arch, ext.type_name)
    if make is None:
        raise CompileError(f"{ext.loc}: unsupported: extern {ext.type_name} ({local}) "
                           f"is not one of architecture {arch.name}")
    return make(InstanceRequest(type_name=ext.type_name, name=ext.name, args=ext.args,
                                type_args=ext.type_args, loc=ext.loc))


def _file(objs: RuntimeObjects, name: str, obj: Any) -> None:
    """File `obj` under its name, and under its kind for the runtime API (an object of
    a target's own extern type has no kind: the program's code alone uses it)."""
    objs.instances[name] = obj
    for cls, store in _KINDS:
        if isinstance(obj, cls):
            store(objs)[name] = obj
            return


def _used_externs(lowered: LoweredProgram) -> list[LoweredExtern]:
    """The extern instances a program has at run time: those of its parser and control
    instances (inline table implementations included), and the top-level ones its
    code or tables name (an unused top-level instance has no object, as p4c gives it
    no P4Info entry)."""
    named = {id(getattr(n, "decl", None)) for n in walk(lowered.checked.program.declarations)
             if isinstance(n, A.PathExpression)}
    out = [e for key, e in lowered.top_externs.items() if key in named]
    for block in lowered.instances():
        out += block.externs
        out += [t.implementation for t in block.tables if t.implementation is not None
                and isinstance(t.implementation.decl, A.MethodCallExpression)]
    return out


def _actions(lowered: LoweredProgram) -> list[LoweredAction]:
    """The actions a program has: those of its instances, and the top-level ones its
    tables list or its code calls."""
    out: list[LoweredAction] = []
    for block in lowered.instances():
        out += block.actions
        for t in block.tables:
            out += [r.action for r in t.actions]
            if t.default is not None:
                out.append(t.default.action)
    for n in walk(lowered.checked.program.declarations):
        if isinstance(n, A.MethodCallExpression) and n.call_kind is A.CallKind.ACTION:
            top = lowered.top_actions.get(id(n.callee_decl))
            if top is not None:
                out.append(top)
    return out


def _table(objs: RuntimeObjects, low: LoweredTable) -> TB.Table:
    """One `Table`: keys, actions (no code yet), default action, resources, const entries."""
    name = low.name
    specs: dict[str, TB.ActionSpec] = {}
    for ref in low.actions:
        specs.setdefault(ref.name, TB.ActionSpec(name=ref.name, params=ref.action.data_params,
                                                 default_only=ref.default_only, table_only=ref.table_only))
    default_name: str | None = None
    default_args: tuple[int, ...] = ()
    if low.default is not None:
        default_name, default_args = low.default.name, low.default.args
        if default_name not in specs:
            specs[default_name] = TB.ActionSpec(name=default_name, params=low.default.action.data_params)
    table = TB.Table(name=name, keys=[TB.KeyField(name=k.name, match_kind=k.match_kind, width=k.width)
                                      for k in low.keys],
                     actions=list(specs.values()), size=low.size,
                     default_action=default_name or "NoAction", default_args=default_args,
                     default_const=low.decl.default_action_const,
                     has_direct_counter=low.direct_counter is not None,
                     has_direct_meter=low.direct_meter is not None, entries_const=low.entries_const)
    if low.implementation is not None:
        prof = objs.action_profiles.get(low.implementation.name)
        if prof is None:
            d = low.implementation.decl
            what = expr_text(d) if isinstance(d, A.MethodCallExpression) else d.name
            raise CompileError(f"{low.decl.loc}: unsupported: implementation of table {name} "
                               f"({what}) is not an action_profile or action_selector")
        table.profile = prof
        for spec in table.actions.values():
            prof.actions.setdefault(spec.name, spec)
        prof.selector_widths = tuple(k.width for k in low.selector_keys)
    props = objs.arch.tables
    resources: tuple[tuple[LoweredExtern | None, dict[str, Any], str | None], ...] = (
        (low.direct_counter, objs.direct_counters, props.direct_counters),
        (low.direct_meter, objs.direct_meters, props.direct_meters))
    for ext, store, prop in resources:
        if ext is not None:
            obj = store.get(ext.name)
            if obj is None:
                raise CompileError(f"{low.decl.loc}: table {name}: {prop} must name a direct extern instance")
            obj.table = table
    for ent in low.entries():
        table.insert(ent.key, ent.action, ent.args, ent.priority, is_const=True)
    return table


def digest_types(lowered: LoweredProgram) -> list[tuple[str, list[str]]]:
    """(name, field names) of each digest the program sends, in source order: one queue
    per type of data (a struct's name; ``digest`` for data of an unnamed type)."""
    arch = lowered.arch
    out: list[tuple[str, list[str]]] = []
    for n in walk(lowered.checked.program.declarations):
        if not (isinstance(n, A.MethodCallExpression) and n.call_kind is A.CallKind.EXTERN_FUNCTION
                and n.args):
            continue
        sem = arch.semantics(getattr(n.callee_decl, "name", ""))
        if sem is None or sem.op is not ExternOp.DIGEST:
            continue
        t = T.strip_newtype(n.args[-1].value.type) if n.args[-1].value.type is not None else None
        name = getattr(t, "name", None) or "digest"
        out.append((name, [f for f, _ in t.fields] if isinstance(t, T.StructLikeType) else []))
    return out
