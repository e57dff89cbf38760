"""Keysets of select cases and const table entries: values, masks, ranges, value sets.

Why shared: a select case label and a const entry key obey the same typing rule (each
component takes the type of its key and must be known at compile time).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from . import ast as A
from . import types as T
from .errors import P4TypeError
from .scope import Scope

if TYPE_CHECKING:
    from .expressions import ExpressionChecker


def _const(ck: ExpressionChecker, e: A.Expression, key_t: T.P4Type, scope: Scope, what: str) -> None:
    ck.check_expr(e, scope)
    ck.coerce(e, key_t, what)
    is_member = isinstance(e, A.MemberExpression) and e.kind in (
        A.MemberKind.ENUM_MEMBER, A.MemberKind.ERROR_MEMBER)
    if e.const_value is None and not is_member:
        raise P4TypeError(e.loc, f"{what}: keyset value must be a compile-time constant")


def value_set_fits(elem: T.P4Type, key_types: list[T.P4Type]) -> bool:
    """Whether a value_set of `elem` matches select keys of `key_types`: one key of the
    same type, or a struct whose fields are, in order, of the keys' types (p4c's
    pvs-struct samples; a one-field struct also serves a single key)."""
    if len(key_types) == 1 and elem == key_types[0]:
        return True
    def leaves(t: T.P4Type) -> list[T.P4Type]:
        base = T.strip_newtype(t)
        if isinstance(base, T.StructType):
            return [x for _, ft in base.fields for x in leaves(ft)]
        return [t]

    if isinstance(T.strip_newtype(elem), T.StructType):
        fts = leaves(elem)  # nested structs count field by field (p4c's pvs-nested-struct)
        return len(fts) == len(key_types) and all(a == b for a, b in zip(fts, key_types))
    return False


def check_keyset(ck: ExpressionChecker, k: A.Keyset, key_t: T.P4Type, scope: Scope, what: str) -> None:
    if isinstance(k, A.DefaultKeyset):
        return
    if isinstance(k, A.ValueKeyset):
        ck.check_expr(k.expr, scope)
        if isinstance(k.expr.type, T.SetType):
            if not value_set_fits(k.expr.type.elem, [key_t]):
                raise P4TypeError(k.loc, f"{what}: value_set of {k.expr.type.elem} used for a key of type {key_t}")
            return
        _const(ck, k.expr, key_t, scope, what)
        return
    base = T.strip_newtype(key_t)
    if not isinstance(base, (T.BitsType, T.SerEnumType)):
        raise P4TypeError(k.loc, f"{what}: masks and ranges need a bit<W> or int<W> key, not {key_t}")
    # value and mask (or bounds) of a serializable-enum key are numbers of its
    # underlying type: enum members convert to it, casts to it are accepted (as p4c does)
    num_t = base.underlying if isinstance(base, T.SerEnumType) else key_t
    if isinstance(k, A.MaskKeyset):
        _const(ck, k.value, num_t, scope, what)
        _const(ck, k.mask, num_t, scope, what)
        return
    if isinstance(k, A.RangeKeyset):
        _const(ck, k.lo, num_t, scope, what)
        _const(ck, k.hi, num_t, scope, what)
        return
    raise P4TypeError(k.loc, f"{what}: unknown keyset {type(k).__name__}")
