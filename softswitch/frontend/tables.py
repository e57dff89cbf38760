"""Tables: keys and match kinds, action lists, default action, const entries, size and
other properties (``counters``, ``meters``, ``implementation`` ...).

Why its own module: a table is a small declarative language of its own with rules
P4Runtime depends on (which actions, which action data, which priorities).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import ast as A
from . import types as T
from .calls import bind_args
from .errors import P4NameError, P4TypeError
from .keysets import check_keyset
from .scope import Scope

if TYPE_CHECKING:
    from .checker import Checker

_MASK_KINDS = frozenset({"ternary", "lpm"})
_RANGE_KINDS = frozenset({"range"})


def _resolve_action(ck: Checker, ref: A.ActionRef, scope: Scope, table: str) -> A.ActionDecl:
    name = ref.name
    decl = (ck.top if name.dot_prefix else scope).lookup(name.name)
    if decl is None:
        raise P4NameError(name.loc, f"undeclared action '{name.name}' in table '{table}'{scope.suggest(name.name)}")
    if not isinstance(decl, A.ActionDecl):
        raise P4TypeError(name.loc, f"'{name.name}' in table '{table}' is not an action")
    name.decl = decl
    name.type = T.ActionType(decl.name)
    ref.decl = decl
    return decl


def _bind(ck: Checker, ref: A.ActionRef, params: list[A.Parameter], scope: Scope, what: str,
          *, const: bool) -> None:
    call = A.MethodCallExpression(callee=ref.name, args=ref.args, loc=ref.loc)
    bind_args(ck, call, params, scope, what, {}, frozenset(), ck.top)
    ref.args = call.args
    ref.params = call.params
    if const:
        for a, p in zip(call.args, call.params):
            if p.direction == A.Direction.NONE and a.value.const_value is None and \
                    not isinstance(a.value, A.MemberExpression):
                raise P4TypeError(a.loc, f"{what}: action data '{p.name}' must be a compile-time constant")


def check_table(ck: Checker, d: A.TableDecl, scope: Scope) -> None:
    scope.declare(d.name, d, d.loc)
    what = f"table '{d.name}'"
    key_types: list[T.P4Type] = []
    kinds = {m.name for m in ck.match_kind_members}
    for k in d.keys:
        kt = ck.check_expr(k.expr, scope)
        base = T.strip_newtype(kt)
        if not isinstance(base, (T.BitsType, T.BoolType, T.SerEnumType, T.ErrorType, T.EnumType)):
            raise P4TypeError(k.expr.loc, f"key of {what} must be bit<W>, int<W>, bool, an enum or error, got {kt}")
        if k.match_kind not in kinds:
            raise P4NameError(k.loc, f"unknown match kind '{k.match_kind}' in {what}"
                              f"{scope.suggest(k.match_kind, candidates=sorted(kinds))}")
        key_types.append(kt)
    listed: dict[int, A.ActionDecl] = {}
    for ref in d.actions:
        a = _resolve_action(ck, ref, scope, d.name)
        if id(a) in listed:
            raise P4NameError(ref.loc, f"action '{a.name}' listed twice in {what}")
        listed[id(a)] = a
        directional = [p for p in a.params if p.direction != A.Direction.NONE]
        if directional and not ref.args:
            raise P4TypeError(ref.loc, f"action '{a.name}' in {what} needs arguments for its parameters with a direction")
        _bind(ck, ref, directional, scope, f"action '{a.name}' in {what}", const=False)
    if d.default_action is not None:
        ref = d.default_action
        a = _resolve_action(ck, ref, scope, d.name)
        if id(a) not in listed:
            raise P4NameError(ref.loc, f"default action '{a.name}' is not in the actions of {what}")
        if a.params and not ref.has_parens:
            raise P4TypeError(ref.loc, f"default action '{a.name}' of {what} needs its arguments")
        data = [p for p in a.params if p.direction == A.Direction.NONE]
        params = data if len(ref.args) == len(data) and len(data) != len(a.params) else a.params
        _bind(ck, ref, params, scope, f"default action '{a.name}' of {what}", const=True)
    for p in d.properties:
        if p.name == "size":
            d.size_value = ck.const_int(p.value, scope, f"size of {what}")
            if d.size_value <= 0:
                raise P4TypeError(p.value.loc, f"size of {what} must be positive, got {d.size_value}")
        else:
            ck.check_expr(p.value, scope)
    if d.entries is not None:
        for ent in d.entries:
            _check_entry(ck, d, ent, key_types, listed, scope)


def _check_entry(ck: Checker, d: A.TableDecl, ent: A.TableEntry, key_types: list[T.P4Type],
                 listed: dict[int, A.ActionDecl], scope: Scope) -> None:
    what = f"entry of table '{d.name}'"
    if len(ent.keysets) != len(key_types):
        raise P4TypeError(ent.loc, f"{what} has {len(ent.keysets)} key value(s), the table has {len(key_types)} key(s)")
    for ks, kt, key in zip(ent.keysets, key_types, d.keys):
        if isinstance(ks, A.MaskKeyset) and key.match_kind not in _MASK_KINDS:
            raise P4TypeError(ks.loc, f"{what}: a mask is not allowed for {key.match_kind} key")
        if isinstance(ks, A.RangeKeyset) and key.match_kind not in _RANGE_KINDS:
            raise P4TypeError(ks.loc, f"{what}: a range is not allowed for {key.match_kind} key")
        if isinstance(ks, A.DefaultKeyset) and key.match_kind == "exact":
            raise P4TypeError(ks.loc, f"{what}: a wildcard is not allowed for exact key")
        check_keyset(ck, ks, kt, scope, what)
    a = _resolve_action(ck, ent.action, scope, d.name)
    if id(a) not in listed:
        raise P4NameError(ent.action.loc, f"action '{a.name}' of {what} is not in the table's actions")
    data = [p for p in a.params if p.direction == A.Direction.NONE]
    # an entry may give the action data only, or (like default_action) every argument
    params = a.params if len(ent.action.args) == len(a.params) and len(a.params) != len(data) else data
    _bind(ck, ent.action, params, scope, f"action '{a.name}' in {what}", const=True)
    prio = ent.priority
    if prio is None:
        ann = A.find_annotation(ent.annotations, "priority")
        if ann is not None and ann.args:
            prio = ann.args[0]
    if prio is not None:
        ent.priority_value = ck.const_int(prio, scope, f"priority of {what}")
