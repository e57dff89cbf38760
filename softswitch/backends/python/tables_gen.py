"""Table compilation: the generated code of each table's actions, bound to its `Table`.

Mixin of `ProgramGen`. The `Table` itself (keys, actions, default action, profile,
direct resources, const entries) is `softswitch.objects`'; this back end names it,
its profile and its direct meter in the generated code and compiles the functions
its actions run (a wrapper for actions with arguments bound in the table's list).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from softswitch import tables as TB
from softswitch.action_profiles import ActionProfile
from softswitch.architecture import Architecture
from softswitch.backends.python.aliasing import aliased_bound_args
from softswitch.backends.python.body import BodyCompiler
from softswitch.backends.python.exprs import is_object_type
from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend.text import expr_text
from softswitch.lowering import LoweredExtern, LoweredProgram
from softswitch.objects import RuntimeObjects


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
    lowered: LoweredProgram
    env: dict[str, Any]
    src: list[str]
    objects: RuntimeObjects
    tables: dict[str, TableInfo]
    action_runtime: dict[str, str]
    action_params: dict[str, list[tuple[str, int]]]
    _action_decl_of: dict[str, Any]
    globals_: dict[Any, str]

    def fresh(self, base: str) -> str:  # pragma: no cover - provided by ProgramGen
        raise NotImplementedError

    def action_fn(self, decl: A.ActionDecl, body: BodyCompiler | None) -> str:  # pragma: no cover
        raise NotImplementedError

    def global_name(self, decl: Any) -> str | None:  # pragma: no cover
        raise NotImplementedError

    def error_codes_of(self, e: Any) -> int | None:  # pragma: no cover
        raise NotImplementedError

    def make_table(self, decl: A.TableDecl, instance: str, scope: dict[Any, str],
                   action_scopes: list[dict[Any, str]] | None = None) -> str:
        low = self.lowered.table(instance, decl)
        name = low.name
        table = self.objects.tables[name]
        fns: dict[str, str] = {}
        for ref in low.actions:
            adecl = ref.action.decl
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            if ref.action.directional:
                afn = self._bind_directional(ref.ref, adecl, afn, action_scopes or [self.globals_])
            fns[ref.name] = afn
        if low.default is not None:
            adecl = low.default.action.decl
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            fns.setdefault(low.default.name, afn)
        profile = self._table_profile(decl, name, low.implementation, scope) if low.implementation is not None else None
        g = self.fresh("T_" + name)
        self.env[g] = table
        info = TableInfo(table=table, global_name=g, decl=decl, action_fns=fns)
        if profile is not None:
            info.profile = profile[1]
        for ext, is_meter in ((low.direct_counter, False), (low.direct_meter, True)):
            if ext is not None:
                d = ext.decl
                obj_name = scope.get(d)
                if obj_name is None and isinstance(d, A.InstantiationDecl):
                    obj_name = self.global_name(d)  # an instance declared at the top level
                obj = self.env.get(obj_name) if obj_name else None
                if obj is None:
                    what = self.arch.tables.direct_meters if is_meter else self.arch.tables.direct_counters
                    raise CompileError(f"{decl.loc}: table {name}: {what} must name a direct extern instance")
                if is_meter:
                    info.direct_meter = obj_name
        self.tables[g] = info
        return g

    def _table_profile(self, decl: A.TableDecl, name: str, impl: LoweredExtern,
                       scope: dict[Any, str]) -> tuple[ActionProfile, str]:
        """The action profile of an indirect table: a named instance or an inline constructor."""
        d = impl.decl
        if d in scope:
            g = scope[d]
            prof = self.env.get(g)
        elif isinstance(d, A.InstantiationDecl):
            g = self.global_name(d) or ""  # a profile declared at the top level
            prof = self.env.get(g)
        else:
            prof = self.objects.instance(impl.name)
            g = self.fresh("X_" + impl.name)
            self.env[g] = prof
        if not isinstance(prof, ActionProfile):
            raise CompileError(f"{decl.loc}: unsupported: implementation of table {name} "
                               f"({expr_text(d) if isinstance(d, A.MethodCallExpression) else d.name}) "
                               f"is not an action_profile or action_selector")
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
        copies: list[tuple[A.Expression, str]] = []  # aliased objects (softswitch.backends.python.aliasing)
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
