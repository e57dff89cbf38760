"""Table compilation: one `Table` per table declaration, its actions, profile and const entries.

Mixin of `ProgramGen`. Which table properties name direct counters, direct
meters and an action profile, and which match kind feeds a selector, are the
architecture's (`Architecture.tables`); the rest is the language's.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from softswitch import tables as TB
from softswitch.action_profiles import ActionProfile
from softswitch.compiler.aliasing import aliased_bound_args
from softswitch.compiler.architecture import Architecture, InstanceRequest
from softswitch.compiler.body import BodyCompiler
from softswitch.compiler.entries import (
    CONST_PRIORITY_BASE,
    action_decl_of,
    const_int,
    keyset_match,
    spec_priorities,
)
from softswitch.compiler.exprs import is_object_type, width_of
from softswitch.compiler.walk import control_plane_name
from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend.text import expr_text


@dataclass(slots=True, kw_only=True)
class TableInfo:
    table: TB.Table
    global_name: str
    decl: A.TableDecl
    direct_meter: str | None = None
    profile: str | None = None   # global name of the ActionProfile of an indirect table
    action_fns: dict[str, str] = field(default_factory=dict)


class TableCompiler:
    """Mixin of ProgramGen: compiles table declarations."""

    arch: Architecture
    checked: Any
    env: dict[str, Any]
    src: list[str]
    tables: dict[str, TableInfo]
    tables_by_name: dict[str, TB.Table]
    action_runtime: dict[str, str]
    action_params: dict[str, list[tuple[str, int]]]
    _action_decl_of: dict[str, Any]
    globals_: dict[Any, str]
    direct_counters: dict[str, Any]
    direct_meters: dict[str, Any]

    def fresh(self, base: str) -> str:  # pragma: no cover - provided by ProgramGen
        raise NotImplementedError

    def action_fn(self, decl: A.ActionDecl, body: BodyCompiler | None) -> str:  # pragma: no cover
        raise NotImplementedError

    def global_name(self, decl: Any) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def make_instance(self, req: InstanceRequest, local_name: str) -> Any:  # pragma: no cover
        raise NotImplementedError

    def error_codes_of(self, e: Any) -> int | None:  # pragma: no cover
        raise NotImplementedError

    def make_table(self, decl: A.TableDecl, instance: str, scope: dict[Any, str],
                   action_scopes: list[dict[Any, str]] | None = None) -> str:
        name = control_plane_name(decl, instance)
        keys = []
        for k in decl.keys:
            if k.match_kind == self.arch.tables.selector_match_kind:
                continue  # hashed to pick a group member, not looked up
            kname = None
            for ann in k.annotations:
                if ann.name == "name" and ann.args:
                    kname = getattr(ann.args[0], "value", None)
            keys.append(TB.KeyField(name=kname or expr_text(k.expr), match_kind=k.match_kind,
                                    width=width_of(k.expr.type)))
        specs = []
        fns: dict[str, str] = {}
        for ref in decl.actions:
            adecl = action_decl_of(ref)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            rt = self.action_runtime[afn]
            if any(p.direction is not A.Direction.NONE for p in adecl.params):
                afn = self._bind_directional(ref, adecl, afn, action_scopes or [self.globals_])
            fns[rt] = afn
            annots = {a.name for a in ref.annotations} | {a.name for a in adecl.annotations}
            specs.append(TB.ActionSpec(name=rt, params=self.action_params[afn],
                                       default_only="defaultonly" in annots,
                                       table_only="tableonly" in annots))
        default_name: str | None = None
        default_args: tuple[int, ...] = ()
        if decl.default_action is not None:
            ref = decl.default_action
            adecl = action_decl_of(ref)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            default_name = self.action_runtime[afn]
            data = [p for p in adecl.params if p.direction is A.Direction.NONE]
            vals = [a.value.const_value for a in ref.args][-len(data):] if data else []
            default_args = tuple(const_int(v, ref) & ((1 << width_of(p.type_ref.type)) - 1)
                                 for v, p in zip(vals, data))
            if default_name not in fns:
                fns[default_name] = afn
                specs.append(TB.ActionSpec(name=default_name, params=self.action_params[afn]))
        else:
            noaction = self.checked.top_level.get("NoAction")
            if noaction is not None:
                afn = self.action_fn(noaction, None)
                default_name = self.action_runtime[afn]
                if default_name not in fns:
                    fns[default_name] = afn
                    specs.append(TB.ActionSpec(name=default_name, params=[]))
        size = decl.size_value or 1024
        props = self.arch.tables
        counters = decl.property(props.direct_counters) if props.direct_counters else None
        meters = decl.property(props.direct_meters) if props.direct_meters else None
        impl = decl.property(props.implementation) if props.implementation else None
        profile = self._table_profile(decl, name, impl, scope) if impl is not None else None
        table = TB.Table(name=name, keys=keys, actions=specs, size=size,
                         default_action=default_name or "NoAction", default_args=default_args,
                         default_const=decl.default_action_const, has_direct_counter=counters is not None,
                         has_direct_meter=meters is not None, entries_const=decl.entries_const)
        g = self.fresh("T_" + name)
        self.env[g] = table
        info = TableInfo(table=table, global_name=g, decl=decl, action_fns=fns)
        if profile is not None:
            prof_obj, info.profile = profile
            table.profile = prof_obj
            for spec in specs:
                prof_obj.actions.setdefault(spec.name, spec)
            prof_obj.selector_widths = tuple(width_of(k.expr.type) for k in decl.keys
                                             if k.match_kind == props.selector_match_kind)
        for prop, store in ((counters, self.direct_counters), (meters, self.direct_meters)):
            if prop is not None:
                d = getattr(prop.value, "decl", None)
                obj_name = scope.get(d) if d is not None else None
                if obj_name is None and isinstance(d, A.InstantiationDecl):
                    obj_name = self.global_name(d)  # an instance declared at the top level
                obj = self.env.get(obj_name) if obj_name else None
                if obj is None:
                    raise CompileError(f"{decl.loc}: table {name}: {prop.name} must name a direct extern instance")
                obj.table = table
                if prop is meters:
                    info.direct_meter = obj_name
        self.tables[g] = info
        self.tables_by_name[name] = table
        if decl.entries:
            self._const_entries(decl, table, fns, scope)
        return g

    def _table_profile(self, decl: A.TableDecl, name: str, impl: Any,
                       scope: dict[Any, str]) -> tuple[ActionProfile, str]:
        """The action profile of an indirect table: a named instance or an inline constructor."""
        v = impl.value
        d = getattr(v, "decl", None)
        if d is not None and d in scope:
            g = scope[d]
            prof = self.env.get(g)
        elif isinstance(d, A.InstantiationDecl):
            g = self.global_name(d) or ""  # a profile declared at the top level
            prof = self.env.get(g)
        elif isinstance(v, A.MethodCallExpression):
            tname = expr_text(v.callee).split("(")[0].split("<")[0]
            prof = self.make_instance(InstanceRequest(type_name=tname, name=f"{name}_implementation",
                                                      args=[a.value for a in v.args], loc=decl.loc),
                                      f"{name}_implementation")
            g = self.fresh("X_" + prof.name)
            self.env[g] = prof
        else:
            prof = None
        if not isinstance(prof, ActionProfile):
            raise CompileError(f"{decl.loc}: unsupported: implementation of table {name} "
                               f"({expr_text(v)}) is not an action_profile or action_selector")
        return prof, g

    def _bind_directional(self, ref: A.ActionRef, adecl: A.ActionDecl, afn: str,
                          scopes: list[dict[Any, str]]) -> str:
        """A table action with directional parameters bound in the table's action list
        (``actions = { a(hdr.x) }``): a wrapper the table calls with the action data only;
        `out`/`inout` scalars are copied back into the bound lvalues."""
        directional = [p for p in adecl.params if p.direction is not A.Direction.NONE]
        args = [a.value for a in ref.args][:len(directional)]
        if len(args) != len(directional):
            raise CompileError(f"{ref.loc}: action {adecl.name} needs its directional arguments "
                               f"bound in the table's action list")
        wrapper = self.fresh(afn + "_bound")
        b = BodyCompiler(self, block=self.action_runtime[afn], scopes=[{}] + scopes)
        b.emit("tr = PK.trace")
        codes: list[str] = []
        backs: list[A.Expression] = []
        copies: list[tuple[A.Expression, str]] = []  # aliased objects (softswitch.compiler.aliasing)
        aliased = aliased_bound_args(directional, args, adecl)
        for p, a in zip(directional, args):
            scalar_out = p.direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(
                p.type_ref.type)
            if scalar_out:
                backs.append(a)
                codes.append(b.ex(a) if p.direction is A.Direction.INOUT else "0")
            elif p.direction is A.Direction.IN and is_object_type(p.type_ref.type) and \
                    isinstance(a, (A.PathExpression, A.MemberExpression, A.IndexExpression)):
                codes.append(f"{b.ex(a)}._copy()")  # `in` is copy-in (see BodyCompiler._invoke)
            elif id(a) in aliased:
                tmp = f"io{len(copies)}"
                b.emit(f"{tmp} = {b.ex(a)}._copy()")
                copies.append((a, tmp))
                codes.append(tmp)
            else:
                codes.append(b.ex(a))
        call = f"{afn}(L, {', '.join(codes)}, *data)"
        if copies:
            # written back on exit too, as p4c writes the copies back before an exit
            b.emit("try:")
            b.emit(f"    r = {call}")
            b.emit("finally:")
            b.indent += 1
            for lv, tmp in copies:
                b.assign(lv, tmp)
            b.indent -= 1
            if backs:
                for i, lv in enumerate(backs):
                    b.assign(lv, f"r[{i}]")
            else:
                b.emit("return r")
        elif backs:
            b.emit(f"r = {call}")
            for i, lv in enumerate(backs):
                b.assign(lv, f"r[{i}]")
        else:
            b.emit(f"return {call}")
        self.src.append(f"def {wrapper}(L, *data):\n" + "\n".join(b.lines) + "\n")
        self.action_runtime[wrapper] = self.action_runtime[afn]
        self.action_params[wrapper] = self.action_params[afn]
        self._action_decl_of[wrapper] = adecl
        return wrapper

    def _const_entries(self, decl: A.TableDecl, table: TB.Table, fns: dict[str, str],
                       scope: dict[Any, str]) -> None:
        running = 0
        spec_prios = spec_priorities(decl) if table.needs_priority else None
        for i, ent in enumerate(decl.entries or []):
            key: list[Any] = []
            keysets = ent.keysets
            if len(keysets) == 1 and len(table.keys) > 1 and isinstance(keysets[0], A.DefaultKeyset):
                keysets = keysets * len(table.keys)
            for kf, ks in zip(table.keys, keysets):
                key.append(keyset_match(kf, ks, self.error_codes_of))
            adecl = action_decl_of(ent.action)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            rt = self.action_runtime[afn]
            data = [p for p in adecl.params if p.direction is A.Direction.NONE]
            vals = [a.value.const_value for a in ent.action.args][-len(data):] if data else []
            args = [const_int(v, ent) & ((1 << width_of(p.type_ref.type)) - 1) for v, p in zip(vals, data)]
            prio = 0
            if spec_prios is not None:
                prio = spec_prios[i]
            elif table.needs_priority:
                # const entries follow p4c/BMv2: the *smallest* @priority wins and an entry
                # without one takes the previous entry's priority + 1 (list order); the
                # table's scale is P4Runtime's (largest wins), hence the subtraction
                p4_prio = ent.priority_value if ent.priority_value is not None else running + 1
                running = p4_prio
                prio = CONST_PRIORITY_BASE - p4_prio
            table.insert(key, rt, args, prio, is_const=True)
