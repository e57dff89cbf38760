"""`lower_program`: the instance tree of a checked program, named and resolved once.

It walks the main package's blocks as the language instantiates them: each block's
constructor arguments (constants, instances declared beside it, or parsers/controls
made in place: ``C2(C1()) c2;`` makes ``c2.<param>``), its local instances (sub-blocks
and extern instances), actions and tables, and the anonymous instance of each direct
invocation (``C.apply()``) in its body, in source order.  A back end generating code
for instance ``I`` asks ``lowered.at(I, declaration)`` what a declaration is there.
"""
from __future__ import annotations

from typing import Any

from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.walk import walk
from softswitch.lowering.model import (
    LoweredAction,
    LoweredBlock,
    LoweredExtern,
    LoweredProgram,
    LoweredValueSet,
)
from softswitch.lowering.names import control_plane_name, direct_instance_name
from softswitch.lowering.parsers import LoweredState, lower_state
from softswitch.lowering.tables import TableLowering


class _Constant:
    """A constructor argument bound to a compile-time value (kept apart from None)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


class _Lowering(TableLowering):
    def __init__(self, checked: Any, arch: Any) -> None:
        self.checked = checked
        self.arch = arch
        self.errors = list(checked.errors) or ["NoError"]
        self.by_place: dict[tuple[str, int], Any] = {}
        self.top_actions: dict[int, LoweredAction] = {}
        self.top_externs: dict[int, LoweredExtern] = {}
        self.parser_states: dict[int, list[LoweredState]] = {}
        for d in checked.program.declarations:
            if isinstance(d, A.ActionDecl):
                self.top_actions[id(d)] = LoweredAction(name=control_plane_name(d, ""), decl=d, block="")
            elif isinstance(d, A.InstantiationDecl) and not isinstance(
                    d.type_decl, (A.ParserDecl, A.ControlDecl, A.PackageTypeDecl)):
                self.top_externs[id(d)] = self.extern(d, "")

    # ------------------------------------------------------------ look-ups
    def action_at(self, block: LoweredBlock, decl: A.ActionDecl) -> LoweredAction:
        got = self.by_place.get((block.name, id(decl)))
        if isinstance(got, LoweredAction):
            return got
        top = self.top_actions.get(id(decl))
        if top is None:  # an action of another block: named as if it were top-level (as before)
            top = self.top_actions[id(decl)] = LoweredAction(name=control_plane_name(decl, ""), decl=decl,
                                                             block="")
        return top

    def extern_at(self, scope: dict[int, Any], decl: Any) -> Any:
        if decl is None:
            return None
        got = scope.get(id(decl))
        if got is None and isinstance(decl, A.InstantiationDecl):
            got = self.top_externs.get(id(decl))
        return got

    # ---------------------------------------------------------- instances
    def extern(self, inst: A.InstantiationDecl, prefix: str) -> LoweredExtern:
        tname = str(getattr(inst.type_decl, "name", None) or getattr(inst.type_ref, "name", ""))
        type_args: list[T.P4Type] = []
        tr = inst.type_ref
        if isinstance(tr, A.SpecializedTypeRef) and tr.args:
            type_args = [a.type for a in tr.args if a.type is not None]
        elif inst.type_bindings:
            type_args = list(inst.type_bindings.values())
        return LoweredExtern(type_name=tname, name=control_plane_name(inst, prefix), decl=inst,
                             args=[a.value for a in inst.args], type_args=type_args, block=prefix, loc=inst.loc)

    def instance(self, inst: A.InstantiationDecl, parent: LoweredBlock, scope: dict[int, Any]) -> None:
        """A local instance of `parent`: a sub-parser/control or an extern instance."""
        td = inst.type_decl
        got: LoweredBlock | LoweredExtern
        if isinstance(td, (A.ParserDecl, A.ControlDecl)):
            got = self.block(td, control_plane_name(inst, parent.name), inst.args, scope)
            parent.instances.append(got)
        else:
            got = self.extern(inst, parent.name)
            parent.externs.append(got)
        scope[id(inst)] = got
        self.by_place[(parent.name, id(inst))] = got

    def block(self, decl: A.ParserDecl | A.ControlDecl, name: str, args: list[Any],
              outer: dict[int, Any]) -> LoweredBlock:
        """One parser/control instance named `name`; `outer`: what the arguments may name."""
        lb = LoweredBlock(kind="parser" if isinstance(decl, A.ParserDecl) else "control", name=name, decl=decl)
        scope: dict[int, Any] = {}
        self._ctor_bindings(lb, args, outer, scope)
        if isinstance(decl, A.ParserDecl):
            for loc in decl.locals:
                if isinstance(loc, A.ValueSetDecl):
                    vs = LoweredValueSet(name=control_plane_name(loc, name), decl=loc,
                                         size=int(loc.size.const_value or 0))
                    lb.value_sets.append(vs)
                    self.by_place[(name, id(loc))] = vs
                elif isinstance(loc, A.InstantiationDecl):
                    self.instance(loc, lb, scope)
            if id(decl) not in self.parser_states:
                self.parser_states[id(decl)] = [lower_state(st) for st in decl.states]
            lb.states = self.parser_states[id(decl)]
            self._direct_invocations(lb, decl.states)
            return lb
        for loc in decl.locals:
            if isinstance(loc, A.InstantiationDecl):
                self.instance(loc, lb, scope)
        for loc in decl.locals:
            if isinstance(loc, A.ActionDecl):
                la = LoweredAction(name=control_plane_name(loc, name), decl=loc, block=name)
                lb.actions.append(la)
                self.by_place[(name, id(loc))] = la
        for loc in decl.locals:
            if isinstance(loc, A.TableDecl):
                t = self.table(loc, lb, scope)
                lb.tables.append(t)
                self.by_place[(name, id(loc))] = t
        self._direct_invocations(lb, decl.body)
        return lb

    def _ctor_bindings(self, lb: LoweredBlock, args: list[Any], outer: dict[int, Any],
                       scope: dict[int, Any]) -> None:
        """Constructor parameters bound to constants, to instances declared beside the
        block (``C2(c1) c2;``), or to parsers/controls made in place (``C2(C1()) c2;``)."""
        for i, p in enumerate(list(getattr(lb.decl, "ctor_params", []) or [])):
            arg = args[i].value if i < len(args) else p.default
            if isinstance(arg, A.PathExpression) and id(arg.decl) in outer:
                bound = outer[id(arg.decl)]
            elif isinstance(arg, A.MethodCallExpression) and arg.call_kind is A.CallKind.CONSTRUCTOR \
                    and isinstance(arg.callee_decl, (A.ParserDecl, A.ControlDecl)):
                bound = self.block(arg.callee_decl, f"{lb.name}.{p.name}", arg.args, outer)
                lb.instances.append(bound)
            else:
                v = getattr(arg, "const_value", None)
                if v is None:
                    raise CompileError(f"{lb.decl.loc}: unsupported: constructor parameter {p.name} of "
                                       f"{lb.name} without a constant argument")
                bound = _Constant(v)
            lb.ctor_args[p.name] = bound.value if isinstance(bound, _Constant) else bound
            scope[id(p)] = bound

    def _direct_invocations(self, lb: LoweredBlock, body: Any) -> None:
        """The anonymous instance of each ``C.apply(...)`` in `body`, in source order."""
        seen: dict[str, int] = {}
        for node in walk(body):
            if not (isinstance(node, A.MethodCallExpression)
                    and node.call_kind in (A.CallKind.CONTROL_APPLY, A.CallKind.PARSER_APPLY)
                    and isinstance(node.callee, A.MemberExpression)):
                continue
            target = getattr(node.callee.expr, "decl", None)
            if isinstance(target, (A.ParserDecl, A.ControlDecl)):
                sub = self.block(target, direct_instance_name(lb.name, target.name, seen), [], {})
                lb.instances.append(sub)
                self.by_place[(lb.name, id(node.callee.expr))] = sub


def lower_program(checked: Any, arch: Any) -> LoweredProgram:
    """The lowered form of `checked` for architecture `arch` (which checks the package
    and names the table properties it gives meaning to)."""
    arch.check_package(checked.main)
    lw = _Lowering(checked, arch)
    blocks = {blk.param: lw.block(blk.decl, blk.decl.name, blk.args, {}) for blk in checked.main.blocks}
    return LoweredProgram(checked=checked, arch=arch, errors=lw.errors, blocks=blocks,
                          top_actions=lw.top_actions, top_externs=lw.top_externs, by_place=lw.by_place,
                          parser_states=lw.parser_states)
