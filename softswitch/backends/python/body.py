"""Statements and calls: the body of one parser, control, action or function.

A `BodyCompiler` emits Python source lines for one generated function. Names of
P4 declarations map to Python expressions through a chain of scopes (local ->
enclosing control -> program). Extern calls are in `core_externs` (core.p4's
inline, the architecture's through its plug-in); this module knows no architecture.
"""
from __future__ import annotations

import re
from typing import Any

from softswitch.backends.python.aliasing import aliased_object_args
from softswitch.backends.python.core_externs import ExternCalls
from softswitch.backends.python.exprs import is_object_type, scalar_kind
from softswitch.backends.python.layout import attr_name, default_value, strip
from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.frontend.walk import walk


class BodyCompiler(ExternCalls):
    """Compiles statements of one generated function into `lines`."""

    def __init__(self, gen: Any, *, block: str, scopes: list[dict[Any, str]],
                 outs: list[str] | None = None, returns_value: bool = False) -> None:
        self.gen = gen
        self.block = block
        self.scopes = scopes
        self.lines: list[str] = []
        self.indent = 1
        self.outs = outs or []
        self.returns_value = returns_value

    # ------------------------------------------------------------------ naming
    def name_of(self, decl: Any, node: Any) -> str:
        for scope in self.scopes:
            n = scope.get(decl)
            if n is not None:
                return n
        n = self.gen.global_name(decl)
        if n is not None:
            return n
        raise CompileError(f"{getattr(node, 'loc', '')}: name {getattr(node, 'name', node)!r} "
                           f"({type(decl).__name__}) is not available in {self.block}")

    def lazy(self, build: Any) -> str:
        """Compile `build()` (which may emit statements) into a nested function, so the
        statements run only when the expression is evaluated; returns the call."""
        name = self.tmp("lz")
        saved, saved_indent, saved_depth = self.lines, self.indent, self.lazy_depth
        self.lines, self.indent, self.lazy_depth = [], 1, 0
        try:
            result = build()
            body = self.lines
        finally:
            self.lines, self.indent, self.lazy_depth = saved, saved_indent, saved_depth
        targets = sorted({m.group(1) for line in body
                          if (m := re.match(r"\s*((?:v|a|p)_\w+)\s*=(?!=)", line))})
        self.emit(f"def {name}():")
        if targets:
            self.emit(f"    nonlocal {', '.join(targets)}")
        self.lines.extend("    " * saved_indent + line for line in body)
        self.emit(f"    return {result}")
        return f"{name}()"

    def emit(self, line: str) -> None:
        self.lines.append("    " * self.indent + line)

    def tmp(self, base: str = "t") -> str:
        return self.gen.fresh(base)

    def trace(self, kind: str, detail: str) -> None:
        self.emit(f"if tr is not None: tr.append(TE({kind!r}, {self.block!r}, {detail}))")

    def return_line(self, value: str | None = None) -> str:
        outs = list(self.outs)
        if self.returns_value:
            if outs:
                return f"return ({value}, {', '.join(outs)},)"
            return f"return {value}"
        if outs:
            return f"return ({', '.join(outs)},)"
        return "return"

    def exit_copy_out_lines(self) -> list[str]:
        """The body's lines; with scalar outs, wrapped so that ``exit`` hands their
        current values to the caller (see ExitSignal)."""
        if not self.outs:
            return self.lines
        values = (["None"] if self.returns_value else []) + list(self.outs)
        return (["    try:"] + ["    " + line for line in self.lines]
                + ["    except ExitSignal as _exit:",
                   f"        _exit.outs = ({', '.join(values)},)",
                   "        raise"])

    # ------------------------------------------------------------- statements
    def block_(self, stmts: list[Any]) -> None:
        start = len(self.lines)
        for s in stmts:
            self.stmt(s)
        if len(self.lines) == start:
            self.emit("pass")

    def nested(self, s: Any) -> None:
        """Compile `s` one indentation level deeper (always producing at least `pass`)."""
        self.indent += 1
        if isinstance(s, A.BlockStatement):
            self.block_(s.statements)
        elif s is None:
            self.emit("pass")
        else:
            self.block_([s])
        self.indent -= 1

    def stmt(self, s: Any) -> None:
        m = getattr(self, "st_" + type(s).__name__, None)
        if m is None:
            raise self.fail(s, f"statement {type(s).__name__}")
        m(s)

    def st_BlockStatement(self, s: A.BlockStatement) -> None:
        for x in s.statements:
            self.stmt(x)

    def st_EmptyStatement(self, s: A.EmptyStatement) -> None:
        pass

    def st_ConstDecl(self, s: A.ConstDecl) -> None:
        if s.value.const_value is None:
            name = self.declare_local(s, s.type_ref.type)
            self.emit(f"{name} = {self.ex(s.value)}")

    def st_VariableDecl(self, s: A.VariableDecl) -> None:
        t = s.type_ref.type
        name = self.declare_local(s, t)
        if is_object_type(t):
            self.emit(f"{name} = {self.gen.layouts.new_value_src(t)}")
            if s.init is not None:
                self.assign_obj(name, s.init)
        else:
            init = self.ex(s.init) if s.init is not None else repr(default_value(t))
            self.emit(f"{name} = {init}")

    def st_InstantiationDecl(self, s: A.InstantiationDecl) -> None:
        self.gen.instantiate(s, self.block)

    def declare_local(self, decl: Any, t: Any) -> str:
        name = self.gen.fresh("v_" + decl.name)
        self.scopes[0][decl] = name
        return name

    def pin_lvalue_indexes(self, lhs: A.Expression, rhs: A.Expression) -> list[int]:
        """P4 evaluates the target of ``a[i] = f(...)`` before the right side: when the
        right side has side effects, run-time indexes of the target are saved first.
        Returns the pinned expressions' ids (to unpin after the statement)."""
        if not self.has_side_effects(rhs):
            return []
        pinned = []
        for n in walk(lhs):
            if isinstance(n, A.IndexExpression) and n.index.const_value is None:
                t = self.tmp("ix")
                self.emit(f"{t} = {self.ex(n.index)}")
                if self.pinned is None:
                    self.pinned = {}
                self.pinned[id(n.index)] = t
                pinned.append(id(n.index))
        return pinned

    def st_AssignmentStatement(self, s: A.AssignmentStatement) -> None:
        pinned = self.pin_lvalue_indexes(s.lhs, s.rhs)
        try:
            if is_object_type(s.lhs.type):
                target = self.ex(s.lhs)
                self.assign_obj(target, s.rhs)
                return
            self.assign(s.lhs, self.ex(s.rhs))
        finally:
            for k in pinned:
                del self.pinned[k]  # type: ignore[union-attr]

    def assign_obj(self, target: str, rhs: A.Expression) -> None:
        if isinstance(rhs, (A.ListExpression, A.StructExpression)):
            self.emit(f"{target}._set_fields(*{self.fields_tuple(rhs)})")
        elif isinstance(rhs, A.DontCareExpression):
            pass
        else:
            self.emit(f"{target}._set({self.ex(rhs)})")

    def assign(self, lhs: A.Expression, code: str) -> None:
        """Store scalar `code` into the lvalue `lhs`."""
        if isinstance(lhs, A.DontCareExpression):
            return
        if is_object_type(lhs.type):
            self.emit(f"{self.ex(lhs)}._set({code})")
            return
        if isinstance(lhs, A.PathExpression):
            self.emit(f"{self.name_of(lhs.decl, lhs)} = {code}")
            return
        if isinstance(lhs, A.MemberExpression) and lhs.kind is A.MemberKind.FIELD:
            self.emit(f"{self.ex(lhs.expr)}.{attr_name(lhs.member)} = {code}")
            return
        if isinstance(lhs, A.SliceExpression):
            hi = lhs.hi_value if lhs.hi_value is not None else lhs.hi.const_value
            lo = lhs.lo_value if lhs.lo_value is not None else lhs.lo.const_value
            if not isinstance(hi, int) or not isinstance(lo, int):
                raise self.fail(lhs, "slice with non-constant bounds")
            kind, w = scalar_kind(lhs.expr.type)
            full = (1 << w) - 1
            mask = ((1 << (hi - lo + 1)) - 1) << lo
            cur = self.ex(lhs.expr)
            new = f"(({cur} & {full & ~mask}) | ((({code}) << {lo}) & {mask}))"
            if kind == "s":
                half = 1 << (w - 1)
                new = f"(({new} ^ {half}) - {half})"
            self.assign(lhs.expr, new)
            return
        raise self.fail(lhs, f"assignment to {expr_text(lhs)}")

    def st_MethodCallStatement(self, s: A.MethodCallStatement) -> None:
        code = self.call(s.call, as_statement=True)
        if code:
            self.emit(code)

    def st_IfStatement(self, s: A.IfStatement) -> None:
        cond = self.ex(s.cond)
        self.emit(f"if {cond}:")
        self.nested(s.then)
        if s.else_ is not None:
            self.emit("else:")
            self.nested(s.else_)

    def st_SwitchStatement(self, s: A.SwitchStatement) -> None:
        e = s.expr
        is_action_run = isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.TABLE_ACTION_RUN
        val = self.tmp("sw")
        self.emit(f"{val} = {self.ex(e)}")
        first = True
        pending: list[str] = []
        default_body: Any = None
        has_default = False
        for case in s.cases:
            if case.label is None or isinstance(case.label, A.DefaultKeyset):
                has_default = True
                default_body = case.body
                if case.body is None:
                    continue
                if pending:  # labels falling through into default
                    pending = []
                continue
            if is_action_run:
                lab = repr(self.gen.action_name_of(case.label))
            else:
                lab = self.ex(case.label)
            pending.append(lab)
            if case.body is None:
                continue
            cond = " or ".join(f"{val} == {p}" for p in pending)
            self.emit(f"{'if' if first else 'elif'} {cond}:")
            first = False
            self.nested(case.body)
            pending = []
        if has_default:
            if first:
                self.emit("if True:")
            else:
                self.emit("else:")
            self.nested(default_body)

    def st_ForStatement(self, s: A.ForStatement) -> None:
        """``for (init; cond; update)`` as a Python ``while``: the update runs at the top
        of every pass but the first, so ``continue`` (a Python ``continue``) still runs it."""
        for st in s.init:
            self.stmt(st)
        again = self.tmp("again") if s.update else None
        if again:
            self.emit(f"{again} = False")
        self.emit("while True:")
        self.indent += 1
        if again:
            self.emit(f"if {again}:")
            self.indent += 1
            for st in s.update:
                self.stmt(st)
            self.indent -= 1
            self.emit(f"{again} = True")
        if s.cond is not None:
            self.emit(f"if not ({self.ex(s.cond)}):")
            self.emit("    break")
        self.indent -= 1
        self.nested(s.body)

    def st_ForInStatement(self, s: A.ForInStatement) -> None:
        t = s.var.type_ref.type
        name = self.declare_local(s.var, t)
        if s.hi is not None:
            self.emit(f"for {name} in range({self.ex(s.collection)}, ({self.ex(s.hi)}) + 1):")
            self.nested(s.body)
            return
        elem = self.tmp("elem")
        self.emit(f"for {elem} in {self.ex(s.collection)}.elems:")
        self.emit(f"    {name} = {elem}._copy()")
        self.nested(s.body)

    def st_BreakStatement(self, s: A.BreakStatement) -> None:
        self.emit("break")

    def st_ContinueStatement(self, s: A.ContinueStatement) -> None:
        self.emit("continue")

    def st_ExitStatement(self, s: A.ExitStatement) -> None:
        self.emit("raise EXIT")

    def st_ReturnStatement(self, s: A.ReturnStatement) -> None:
        value = self.ex(s.value) if s.value is not None else None
        self.emit(self.return_line(value))

    # ------------------------------------------------------------------- calls
    def call(self, e: A.MethodCallExpression, *, as_statement: bool) -> str:
        k = e.call_kind
        if k is A.CallKind.BUILTIN_METHOD:
            return self.call_builtin(e)
        if k is A.CallKind.TABLE_APPLY:
            hit, _ = self.table_apply(e)
            return "" if as_statement else hit
        if k is A.CallKind.ACTION:
            return self.invoke(self.gen.action_fn(e.callee_decl, self), e, prefix=["L"],
                               as_statement=as_statement)
        if k is A.CallKind.FUNCTION:
            return self.invoke(self.gen.function_fn(e.callee_decl), e, prefix=[],
                               as_statement=as_statement, returns_value=True)
        if k in (A.CallKind.PARSER_APPLY, A.CallKind.CONTROL_APPLY):
            inst = e.callee.expr if isinstance(e.callee, A.MemberExpression) else e.callee
            fn = self.gen.sub_block_fn(inst, self)
            return self.invoke(fn, e, prefix=[], as_statement=as_statement)
        if k is A.CallKind.EXTERN_FUNCTION:
            return self.call_extern_function(e, as_statement)
        if k is A.CallKind.EXTERN_METHOD:
            return self.call_extern_method(e, as_statement)
        raise self.fail(e, f"call of kind {k} ({expr_text(e)})")

    def args(self, e: A.MethodCallExpression) -> list[A.Expression]:
        return [a.value for a in e.args]

    def invoke(self, fn: str, e: A.MethodCallExpression, *, prefix: list[str], as_statement: bool,
               returns_value: bool = False) -> str:
        if not as_statement and self.lazy_depth and (self._has_writeback(e) or aliased_object_args(e)):
            return self.lazy(lambda: self._invoke(fn, e, prefix=prefix, as_statement=False,
                                                  returns_value=returns_value))
        return self._invoke(fn, e, prefix=prefix, as_statement=as_statement, returns_value=returns_value)

    @staticmethod
    def _has_writeback(e: A.MethodCallExpression) -> bool:
        for p, a in zip(e.params or [], e.args):
            direction = getattr(p, "direction", A.Direction.IN)
            pt = getattr(getattr(p, "type_ref", None), "type", None) or a.value.type
            if direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(pt):
                return True
        return False

    def _invoke(self, fn: str, e: A.MethodCallExpression, *, prefix: list[str], as_statement: bool,
                returns_value: bool = False) -> str:
        params = e.params or [None] * len(e.args)
        codes = list(prefix)
        backs: list[A.Expression] = []
        args = self.args(e)
        read = [a for p, a in zip(params, args) if not isinstance(a, A.DontCareExpression)
                and getattr(p, "direction", A.Direction.IN) is not A.Direction.OUT]
        value_of = dict(zip((id(a) for a in read), self.ex_in_order(read)))
        aliased = aliased_object_args(e)
        # copied back after the call, in parameter order: (lvalue, None) takes the next
        # scalar the callee returns; (lvalue, temp) an object passed as a copy
        copy_out: list[tuple[A.Expression, str | None]] = []
        for p, a in zip(params, args):
            direction = getattr(p, "direction", A.Direction.IN)
            pt = getattr(getattr(p, "type_ref", None), "type", None) or a.type
            if direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(pt):
                if direction is A.Direction.INOUT and not isinstance(a, A.DontCareExpression):
                    codes.append(value_of[id(a)])
                else:
                    codes.append(repr(default_value(pt)) if pt is not None else "0")
                backs.append(a)
                copy_out.append((a, None))
            else:
                code = value_of[id(a)] if id(a) in value_of else self.ex(a)
                if direction in (A.Direction.IN, A.Direction.NONE) and is_object_type(pt) \
                        and isinstance(a, (A.PathExpression, A.MemberExpression, A.IndexExpression)):
                    # `in` is copy-in: the callee sees the value at the call even when
                    # it writes the argument's original (`a(in H v)` called as `a(h)`)
                    code = f"{code}._copy()"
                elif id(a) in aliased:
                    # copy-in/copy-out: the callee reaches the argument's storage another
                    # way too, and the copy it was given overwrites those writes at return
                    tmp = self.tmp("io")
                    self.emit(f"{tmp} = {code}._copy()")
                    code = tmp
                    copy_out.append((a, tmp))
                codes.append(code)
        has_value = returns_value and not isinstance(strip(e.type) if e.type else None, T.VoidType) \
            and e.type is not None
        call = f"{fn}({', '.join(codes)})"
        if not copy_out:
            return call
        t = self.tmp("r")
        off = 1 if has_value else 0
        # exit inside the callee still copies the outs back (ExitSignal.outs)
        self.emit("try:")
        self.emit(f"    {t} = {call}")
        self.emit("except ExitSignal as _exit:")
        self.indent += 1
        if backs:
            self.emit(f"{t} = _exit.outs")
        self._copy_back(copy_out, t, off)
        self.emit("raise")
        self.indent -= 1
        self._copy_back(copy_out, t, off)
        if as_statement:
            return ""
        if not backs:
            return t if has_value else "None"
        return f"{t}[0]" if has_value else "None"

    def _copy_back(self, copy_out: list[tuple[A.Expression, str | None]], result: str, off: int) -> None:
        i = off
        for lv, tmp in copy_out:
            if tmp is None:
                self.assign(lv, f"{result}[{i}]")
                i += 1
            else:
                self.assign(lv, tmp)

    def call_builtin(self, e: A.MethodCallExpression) -> str:
        callee = e.callee
        if not isinstance(callee, A.MemberExpression):
            raise self.fail(e, f"built-in call {expr_text(e)}")
        m = callee.member
        target_t = strip(callee.expr.type)
        target = self.ex(callee.expr)
        if m == "isValid":
            if isinstance(target_t, T.HeaderUnionType):
                return f"{target}._is_valid()"
            return f"{target}._valid"
        if m == "setValid":
            parent = callee.expr
            if isinstance(parent, A.MemberExpression) and isinstance(
                    strip(parent.expr.type), T.HeaderUnionType):
                self.emit(f"{self.ex(parent.expr)}._only_valid({attr_name(parent.member)!r})")
            self.emit(f"{target}._valid = True")
            return ""
        if m == "setInvalid":
            self.emit(f"{target}._valid = False")
            return ""
        if m in ("push_front", "pop_front"):
            n = self.ex(self.args(e)[0])
            self.emit(f"{target}.{m}({n})")
            return ""
        if m in ("minSizeInBits", "minSizeInBytes", "maxSizeInBits", "maxSizeInBytes"):
            if target_t is None:
                raise self.fail(e, f"{m} of an untyped value")
            bits = T.bit_width(target_t)
            return repr(bits if "Bits" in m else (bits + 7) // 8)
        raise self.fail(e, f"built-in method {m}")

    # ------------------------------------------------------------------ tables
    def table_apply(self, e: A.MethodCallExpression) -> tuple[str, str]:
        tdecl = e.callee_decl
        if not isinstance(tdecl, A.TableDecl):
            inner = e.callee.expr if isinstance(e.callee, A.MemberExpression) else None
            tdecl = getattr(inner, "decl", None)
        info = self.gen.table_info(tdecl, self)
        ent, hit = self.tmp("e"), self.tmp("hit")
        keys: list[str] = []
        selector: list[str] = []
        for k in tdecl.keys:
            code = self.ex(k.expr)
            kind, w = scalar_kind(k.expr.type)
            if kind == "b":
                code = f"int({code})"
            elif kind == "s":
                code = f"({code} & {(1 << w) - 1})"
            (selector if k.match_kind == self.gen.arch.tables.selector_match_kind else keys).append(code)
        tb = info.global_name
        if keys:
            key = self.tmp("k")
            self.emit(f"{key} = ({''.join(k + ', ' for k in keys)})")
            self.emit(f"{ent} = {tb}.lookup({key})")
        else:
            key = "()"
            self.emit(f"{ent} = None")
        self.emit(f"if {ent} is None:")
        self.emit(f"    {ent} = {tb}.default; {hit} = False")
        self.emit("else:")
        self.emit(f"    {hit} = True")
        if info.table.has_direct_counter:
            self.emit(f"    {ent}.packets += 1; {ent}.bytes += PK.length")
        if info.direct_meter is not None:
            self.emit(f"    {info.direct_meter}.execute_entry({ent}, PK.length, PK.now_us)")
        act = ent
        if info.profile is not None:
            act = self.tmp("m")
            self.emit(f"{act} = {info.profile}.pick({ent}, ({''.join(c + ', ' for c in selector)})) "
                      f"if {hit} else {ent}")
        self.emit(f"if tr is not None: tr.append(TE('table', {self.block!r}, {{'table': {info.table.name!r}, "
                  f"'key': {key}, 'hit': {hit}, 'entry': {ent}.describe() if {hit} else None, "
                  f"'action': {act}.action, 'args': {act}.args}}))")
        self.emit(f"{act}.fn(L, *{act}.args)")
        return hit, act


def invalidate_outs(b: BodyCompiler, params: list[Any], names: list[str]) -> None:
    """`out` headers/structs start uninitialised: their headers are invalid (P4 spec 6.8)."""
    for p, n in zip(params, names):
        if p.direction is A.Direction.OUT and is_object_type(p.type_ref.type):
            b.emit(f"{n}._invalidate()")
