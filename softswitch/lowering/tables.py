"""Tables lowered: keys, actions, default action, direct resources, implementation and
const entries (their keysets as match values, their priorities).

Why here: the rules for entry priorities (p4c's ``@priority`` versus the language's
``priority = N :`` with ``largest_priority_wins``/``priority_delta``), keysets and
default-action data are pure functions of the table declaration; both back ends and
the runtime take the result.  Which table properties name direct counters, meters and
the action profile, and which match kind feeds a selector, are the architecture's
(``Architecture.tables``).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from softswitch import tables as TB
from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend.text import expr_text
from softswitch.lowering.model import (
    LoweredAction,
    LoweredActionRef,
    LoweredBlock,
    LoweredDefault,
    LoweredEntry,
    LoweredExtern,
    LoweredKey,
    LoweredTable,
    value_width,
)
from softswitch.lowering.names import annotation_str, control_plane_name

CONST_PRIORITY_BASE = 1 << 30
DEFAULT_TABLE_SIZE = 1024


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


def keyset_match(kf: Any, ks: Any, errors: Callable[[A.Expression], int | None] | None = None) -> Any:
    """The match of one const-entry keyset for key `kf` (its ``match_kind`` and
    ``width``); `errors(expr)` gives the code of an `error.X` key (an error is not a
    compile-time number in the front end)."""
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


def _action_data(ref: A.ActionRef, action: LoweredAction) -> list[int]:
    """The action data an action reference binds (its trailing directionless
    arguments), each masked to its parameter's width."""
    data = [p for p in action.decl.params if p.direction is A.Direction.NONE]
    vals = [a.value.const_value for a in ref.args][-len(data):] if data else []
    return [const_int(v, ref) & ((1 << value_width(p.type_ref.type)) - 1) for v, p in zip(vals, data)]


class TableLowering:
    """Lowers the tables of one program (mixin of the program lowering, which resolves
    actions and extern instances of an instance)."""

    arch: Any
    checked: Any
    errors: list[str]

    def action_at(self, block: LoweredBlock, decl: A.ActionDecl) -> LoweredAction:  # pragma: no cover
        raise NotImplementedError

    def extern_at(self, scope: dict[int, Any], decl: Any) -> Any:  # pragma: no cover
        raise NotImplementedError

    def error_code_of(self, e: A.Expression) -> int | None:
        """The code of an `error.X` expression, None for anything else."""
        if isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.ERROR_MEMBER:
            if e.member not in self.errors:
                raise CompileError(f"{e.loc}: unknown error member {e.member}")
            return self.errors.index(e.member)
        return None

    def table(self, decl: A.TableDecl, block: LoweredBlock, scope: dict[int, Any]) -> LoweredTable:
        name = control_plane_name(decl, block.name)
        selector = self.arch.tables.selector_match_kind
        keys: list[LoweredKey] = []
        selector_keys: list[LoweredKey] = []
        for k in decl.keys:
            key = LoweredKey(name=annotation_str(k, "name") or expr_text(k.expr), match_kind=k.match_kind,
                             expr=k.expr, decl=k)
            (selector_keys if selector is not None and k.match_kind == selector else keys).append(key)
        refs = []
        for ref in decl.actions:
            la = self.action_at(block, action_decl_of(ref))
            annots = {a.name for a in ref.annotations} | {a.name for a in la.decl.annotations}
            refs.append(LoweredActionRef(name=la.name, action=la, ref=ref, default_only="defaultonly" in annots,
                                         table_only="tableonly" in annots))
        default = None
        if decl.default_action is not None:
            ref = decl.default_action
            la = self.action_at(block, action_decl_of(ref))
            default = LoweredDefault(action=la, args=tuple(_action_data(ref, la)),
                                     const=decl.default_action_const, ref=ref)
        else:
            noaction = self.checked.top_level.get("NoAction")
            if isinstance(noaction, A.ActionDecl):
                default = LoweredDefault(action=self.action_at(block, noaction), implicit=True)
        props = self.arch.tables
        out = LoweredTable(name=name, decl=decl, block=block.name, keys=keys, selector_keys=selector_keys,
                           actions=refs, default=default, size=decl.size_value or DEFAULT_TABLE_SIZE,
                           declared_size=decl.size_value, entries_const=decl.entries_const,
                           _lower_entries=lambda t: self.entries(t, block))
        out.direct_counter = self._direct_resource(decl, name, props.direct_counters, scope)
        out.direct_meter = self._direct_resource(decl, name, props.direct_meters, scope)
        impl = decl.property(props.implementation) if props.implementation else None
        if impl is not None:
            out.implementation = self._implementation(decl, name, impl.value, scope)
        return out

    def _direct_resource(self, decl: A.TableDecl, name: str, prop_name: str | None,
                         scope: dict[int, Any]) -> LoweredExtern | None:
        """The instance a direct-resource property (the architecture's) names."""
        prop = decl.property(prop_name) if prop_name else None
        if prop is None:
            return None
        target = self.extern_at(scope, getattr(prop.value, "decl", None))
        if not isinstance(target, LoweredExtern):
            raise CompileError(f"{decl.loc}: table {name}: {prop.name} must name a direct extern instance")
        return target

    def _implementation(self, decl: A.TableDecl, name: str, v: A.Expression,
                        scope: dict[int, Any]) -> LoweredExtern:
        """The action profile of an indirect table: a named instance or an inline constructor."""
        target = self.extern_at(scope, getattr(v, "decl", None))
        if isinstance(target, LoweredExtern):
            return target
        if target is None and isinstance(v, A.MethodCallExpression):
            tname = expr_text(v.callee).split("(")[0].split("<")[0]
            return LoweredExtern(type_name=tname, name=f"{name}_implementation", decl=v,
                                 args=[a.value for a in v.args], block=name, loc=decl.loc)
        raise CompileError(f"{decl.loc}: unsupported: implementation of table {name} "
                           f"({expr_text(v)}) is not an action_profile or action_selector")

    def entries(self, t: LoweredTable, block: LoweredBlock) -> list[LoweredEntry]:
        """The const entries of `t`: keysets as matches, action data, priorities."""
        decl = t.decl
        out: list[LoweredEntry] = []
        running = 0
        spec_prios = spec_priorities(decl) if t.needs_priority else None
        for i, ent in enumerate(decl.entries or []):
            keysets = ent.keysets
            if len(keysets) == 1 and len(t.keys) > 1 and isinstance(keysets[0], A.DefaultKeyset):
                keysets = keysets * len(t.keys)
            key = [keyset_match(kf, ks, self.error_code_of) for kf, ks in zip(t.keys, keysets)]
            la = self.action_at(block, action_decl_of(ent.action))
            prio = 0
            if spec_prios is not None:
                prio = spec_prios[i]
            elif t.needs_priority:
                # const entries follow p4c/BMv2: the *smallest* @priority wins and an entry
                # without one takes the previous entry's priority + 1 (list order); the
                # table's scale is P4Runtime's (largest wins), hence the subtraction
                p4_prio = ent.priority_value if ent.priority_value is not None else running + 1
                running = p4_prio
                prio = CONST_PRIORITY_BASE - p4_prio
            out.append(LoweredEntry(key=key, action=la.name, args=_action_data(ent.action, la),
                                    priority=prio, decl=ent))
        return out
