"""Const and initial table entries: their keysets as matches and their priorities.

Why separate: the rules for entry priorities (p4c's `@priority` annotation versus the
language's `priority = N :` with `largest_priority_wins`/`priority_delta`) and for
keysets are pure functions of the table declaration, apart from the program compiler.
"""
from __future__ import annotations

from typing import Any

from softswitch import tables as TB
from softswitch.errors import CompileError
from softswitch.frontend import ast as A

CONST_PRIORITY_BASE = 1 << 30


def spec_priorities(decl: A.TableDecl) -> list[int] | None:
    """Priorities of entries written with P4_16 1.2.4's `priority = N :` prefix, on the
    table's P4Runtime scale (largest wins), or None when no entry uses the prefix.

    The language's rules (as p4c's front end applies them): the first entry names its
    priority; an entry without one takes the previous one's minus `priority_delta`
    (default 1) when `largest_priority_wins` (default true), plus it otherwise. With
    `largest_priority_wins = false` the smallest number wins, so the scale is turned
    around."""
    entries = decl.entries or []
    if not any(e.priority is not None for e in entries):
        return None
    largest = True
    delta = 1
    prop = decl.property("largest_priority_wins")
    if prop is not None:
        v = getattr(prop.value, "const_value", None)
        if not isinstance(v, bool):
            raise CompileError(f"{prop.loc}: largest_priority_wins must be a constant bool")
        largest = v
    prop = decl.property("priority_delta")
    if prop is not None:
        v = getattr(prop.value, "const_value", None)
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise CompileError(f"{prop.loc}: priority_delta must be a positive constant, got {v!r}")
        delta = v
    if entries[0].priority is None:
        raise CompileError(f"{entries[0].loc}: the first entry must have a priority when others do")
    out: list[int] = []
    current = 0
    for ent in entries:
        if ent.priority_value is not None and ent.priority is not None:
            current = ent.priority_value
        if current <= 0 or current >= CONST_PRIORITY_BASE:
            raise CompileError(f"{ent.loc}: entry priority {current} out of range 1..{CONST_PRIORITY_BASE - 1}")
        out.append(current if largest else CONST_PRIORITY_BASE - current)
        current = current - delta if largest else current + delta
    return out


def const_int(v: Any, node: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise CompileError(f"{getattr(node, 'loc', '')}: expected a constant integer, got {v!r}")
    return v


def action_decl_of(ref: Any) -> A.ActionDecl:
    decl = ref.decl or getattr(ref.name, "decl", None)
    if not isinstance(decl, A.ActionDecl):
        raise CompileError(f"{ref.loc}: {getattr(ref.name, 'name', ref)} is not an action")
    return decl


def keyset_match(kf: TB.KeyField, ks: Any, errors: Any = None) -> Any:
    """The match of one const-entry keyset; `errors(expr)` gives the code of an
    `error.X` key (an error is not a compile-time number in the front end)."""
    w = kf.width
    full = (1 << w) - 1
    kind = kf.match_kind
    if isinstance(ks, A.DefaultKeyset):
        return {"exact": TB.Exact(0), "lpm": TB.Lpm(0, 0), "ternary": TB.Ternary(0, 0),
                "range": TB.Range(0, full), "optional": TB.Optional(None)}[kind]
    if isinstance(ks, A.MaskKeyset):
        v, m = const_int(ks.value.const_value, ks) & full, const_int(ks.mask.const_value, ks) & full
        if kind == "lpm":
            plen = m.bit_count()
            return TB.Lpm(v & m, plen)
        return TB.Ternary(v & m, m)
    if isinstance(ks, A.RangeKeyset):
        return TB.Range(const_int(ks.lo.const_value, ks), const_int(ks.hi.const_value, ks))
    if isinstance(ks, A.ValueKeyset):
        cv = ks.expr.const_value
        if cv is None and errors is not None:
            cv = errors(ks.expr)
        if not isinstance(cv, int):
            raise CompileError(f"{ks.loc}: table entry key must be a constant")
        v = int(cv) & full
        if kind == "lpm":
            return TB.Lpm(v, w)
        if kind == "ternary":
            return TB.Ternary(v, full)
        if kind == "range":
            return TB.Range(v, v)
        if kind == "optional":
            return TB.Optional(v)
        return TB.Exact(v)
    raise CompileError(f"{getattr(ks, 'loc', '')}: unsupported keyset {type(ks).__name__}")
