"""Expressions: P4 operator semantics as Python source text.

Values at run time: ``bit<W>`` is an int in [0, 2^W); ``int<W>`` an int in the
two's complement range; ``bool`` a bool; ``error`` its code (position in the
error list, NoError = 0); a serializable enum its integer; a plain enum the
member's position; headers/structs/unions objects from `layout`.

Every operator keeps results in range with constant masks, so assignments never
need to re-mask. `ExprCompiler` is mixed into the body compiler, which supplies
``name_of(decl)``, ``emit`` (statements that must run before the expression,
e.g. a table apply, go out first) and ``gen`` (program-level state).
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.python.layout import attr_name, strip
from softswitch.errors import CompileError
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.frontend.walk import walk
from softswitch.lowering.model import value_width

# widths of values in keys, action data and value sets are the lowering's
width_of = value_width


def scalar_kind(t: T.P4Type | None) -> tuple[str, int]:
    """('u', W) unsigned bits, ('s', W) signed, ('i', 0) arbitrary int, ('b', 1) bool, ('o', 0) other."""
    t = strip(t)
    if isinstance(t, T.SerEnumType):
        t = t.underlying
    if isinstance(t, T.BitsType):
        return ("s" if t.signed else "u", t.width)
    if isinstance(t, T.IntType):
        return ("i", 0)
    if isinstance(t, T.BoolType):
        return ("b", 1)
    return ("o", 0)


def is_object_type(t: T.P4Type | None) -> bool:
    t = strip(t) if t is not None else None
    return isinstance(t, (T.StructLikeType, T.StackType))


def wrap(code: str, kind: str, w: int) -> str:
    """Reduce an unbounded integer expression to the range of bit<w>/int<w>."""
    if kind == "u":
        return f"(({code}) & {(1 << w) - 1})"
    if kind == "s":
        half = 1 << (w - 1)
        return f"(((({code}) + {half}) & {(1 << w) - 1}) - {half})"
    return f"({code})"


def const_literal(e: A.Expression) -> str | None:
    v = e.const_value
    if v is None:
        return None
    t = strip(e.type) if e.type is not None else None
    if isinstance(v, bool):
        if isinstance(t, T.BoolType) or t is None:
            return repr(v)
        return repr(int(v))
    if isinstance(v, int) and isinstance(t, (T.BitsType, T.IntType, T.SerEnumType, type(None))):
        return repr(v)
    return None


def _object_with_fields(obj: Any, values: tuple) -> Any:
    """Fill a fresh struct/header object from a tuple of field values (a header becomes valid)."""
    obj._set_fields(*values)
    return obj


class ExprCompiler:
    gen: Any
    # > 0 while compiling code that may not run (right of && / ||, branches of ?:):
    # statements an expression needs (table apply, out-argument write-back) must then
    # run only when evaluated, so they go into a nested function (see BodyCompiler.lazy)
    lazy_depth: int = 0

    def lazy(self, build: Any) -> str:  # pragma: no cover - provided by subclass
        raise NotImplementedError

    def emit(self, line: str) -> None:  # pragma: no cover - provided by subclass
        raise NotImplementedError

    def tmp(self, base: str = "t") -> str:  # pragma: no cover - provided by subclass
        raise NotImplementedError

    @staticmethod
    def has_side_effects(e: A.Expression) -> bool:
        """Whether evaluating `e` changes state: a table apply, or a call that writes
        arguments back (its write-back runs as a statement before the expression)."""
        for n in walk(e):
            if not isinstance(n, A.MethodCallExpression):
                continue
            if n.call_kind is A.CallKind.TABLE_APPLY:
                return True
            for p, a in zip(n.params or [], n.args):
                if getattr(p, "direction", None) in (A.Direction.OUT, A.Direction.INOUT) \
                        and not is_object_type(getattr(getattr(p, "type_ref", None), "type", None)
                                               or a.value.type):
                    return True
        return False

    def ex_in_order(self, exprs: list[A.Expression]) -> list[str]:
        """Operands evaluated left to right, as P4 says: an operand followed by one with
        side effects is saved to a temporary first, so it keeps the value it had before
        (``{ x, f(x) }`` with ``f`` writing ``x``).  Not where code may not run (lazy)."""
        later = [False] * len(exprs)
        if not self.lazy_depth:
            seen = False
            for i in range(len(exprs) - 1, -1, -1):
                later[i] = seen
                seen = seen or self.has_side_effects(exprs[i])
        out = []
        for x, save in zip(exprs, later):
            code = self.ex(x)
            if save and x.const_value is None:
                t = self.tmp("o")
                self.emit(f"{t} = {code}._copy()" if is_object_type(x.type) else f"{t} = {code}")
                code = t
            out.append(code)
        return out

    def name_of(self, decl: Any, node: Any) -> str:  # pragma: no cover - provided by subclass
        raise NotImplementedError

    def fail(self, node: Any, what: str) -> CompileError:
        loc = getattr(node, "loc", None)
        return CompileError(f"{loc}: unsupported: {what}" if loc else f"unsupported: {what}")

    # ------------------------------------------------------------------ rvalues
    # expressions already evaluated into a temporary (by id), see pin_lvalue_indexes
    pinned: dict[int, str] | None = None

    def ex(self, e: A.Expression) -> str:
        if self.pinned and id(e) in self.pinned:
            return self.pinned[id(e)]
        lit = const_literal(e)
        if lit is not None and not isinstance(e, A.MethodCallExpression):
            return lit
        m = getattr(self, "ex_" + type(e).__name__, None)
        if m is None:
            raise self.fail(e, f"expression {type(e).__name__} ({expr_text(e)})")
        return m(e)

    def ex_IntLiteral(self, e: A.IntLiteral) -> str:
        return repr(e.value)

    def ex_BoolLiteral(self, e: A.BoolLiteral) -> str:
        return repr(bool(e.value))

    def ex_StringLiteral(self, e: A.StringLiteral) -> str:
        return repr(e.value)

    def ex_PathExpression(self, e: A.PathExpression) -> str:
        d = e.decl
        if isinstance(d, A.ConstDecl):
            if d.value.const_value is not None:
                return const_literal(d.value) or repr(d.value.const_value)
            return self.ex(d.value)
        return self.name_of(d, e)

    def ex_TypeNameExpression(self, e: A.TypeNameExpression) -> str:
        raise self.fail(e, f"type name {expr_text(e)} used as a value")

    def ex_MemberExpression(self, e: A.MemberExpression) -> str:
        k = e.kind
        if k is A.MemberKind.FIELD:
            base = self.ex(e.expr)
            return f"{base}.{attr_name(e.member)}"
        if k is A.MemberKind.ENUM_MEMBER:
            t = strip(e.type)
            if isinstance(t, T.SerEnumType):
                return repr(t.value(e.member))
            d = e.decl
            if isinstance(d, A.EnumMember) and d.int_value is not None:
                return repr(d.int_value)
            return repr(e.member)
        if k is A.MemberKind.ERROR_MEMBER:
            return repr(self.gen.error_code(e.member, e))
        if k is A.MemberKind.MATCH_KIND_MEMBER:
            return repr(e.member)
        if k is A.MemberKind.STACK_NEXT:
            return f"{self.ex(e.expr)}.next()"
        if k is A.MemberKind.STACK_LAST:
            return f"{self.ex(e.expr)}.last()"
        if k is A.MemberKind.STACK_SIZE:
            st = strip(e.expr.type)
            return repr(st.size) if isinstance(st, T.StackType) else f"{self.ex(e.expr)}.size"
        if k is A.MemberKind.STACK_LAST_INDEX:
            return f"{self.ex(e.expr)}.last_index()"
        if k in (A.MemberKind.TABLE_HIT, A.MemberKind.TABLE_MISS, A.MemberKind.TABLE_ACTION_RUN):
            call = e.expr
            if not isinstance(call, A.MethodCallExpression):
                raise self.fail(e, "table result of something other than apply()")

            def result() -> str:
                hit_var, entry_var = self.table_apply(call)
                if k is A.MemberKind.TABLE_HIT:
                    return hit_var
                if k is A.MemberKind.TABLE_MISS:
                    return f"(not {hit_var})"
                return f"{entry_var}.action"

            return self.lazy(result) if self.lazy_depth else result()
        stack_t = strip(e.expr.type)
        if e.member == "size" and isinstance(stack_t, T.StackType):
            return repr(stack_t.size)
        raise self.fail(e, f"member {e.member} of kind {k}")

    def ex_IndexExpression(self, e: A.IndexExpression) -> str:
        base = self.ex(e.expr)
        st = strip(e.expr.type)
        idx = e.index.const_value
        if isinstance(idx, int) and isinstance(st, T.StackType):
            if not 0 <= idx < st.size:
                raise CompileError(f"{e.loc}: index {idx} out of bounds for stack of size {st.size}")
            return f"{base}.elems[{idx}]"
        return f"{base}.at({self.ex(e.index)})"

    def ex_SliceExpression(self, e: A.SliceExpression) -> str:
        hi = e.hi_value if e.hi_value is not None else e.hi.const_value
        lo = e.lo_value if e.lo_value is not None else e.lo.const_value
        if not isinstance(hi, int) or not isinstance(lo, int):
            raise self.fail(e, "slice with non-constant bounds")
        mask = (1 << (hi - lo + 1)) - 1
        inner = self.ex(e.expr)
        return f"(({inner} >> {lo}) & {mask})" if lo else f"({inner} & {mask})"

    def ex_UnaryExpression(self, e: A.UnaryExpression) -> str:
        a = self.ex(e.operand)
        kind, w = scalar_kind(e.type)
        if e.op == "!":
            return f"(not {a})"
        if e.op == "+":
            return a
        if e.op == "~":
            if kind == "u":
                return f"({a} ^ {(1 << w) - 1})"
            return f"(~{a})"
        if e.op == "-":
            return wrap(f"-{a}", kind, w)
        raise self.fail(e, f"unary operator {e.op}")

    def ex_BinaryExpression(self, e: A.BinaryExpression) -> str:
        op = e.op
        if op in ("&&", "||"):
            left = self.ex(e.left)
            self.lazy_depth += 1
            try:
                right = self.ex(e.right)
            finally:
                self.lazy_depth -= 1
            return f"({left} {'and' if op == '&&' else 'or'} {right})"
        a, b = self.ex_in_order([e.left, e.right])
        kind, w = scalar_kind(e.type)
        if op in ("==", "!="):
            if is_object_type(e.left.type):
                r = f"{a}._eq({b})"
                return r if op == "==" else f"(not {r})"
            return f"({a} {op} {b})"
        if op in ("<", "<=", ">", ">="):
            return f"({a} {op} {b})"
        if op in ("+", "-", "*"):
            return wrap(f"{a} {op} {b}", kind, w)
        if op in ("&", "|", "^"):
            return f"({a} {op} {b})"
        if op == "/":
            return wrap(f"_div({a}, {b})", kind, w) if kind == "s" else f"_div({a}, {b})"
        if op == "%":
            return f"_mod({a}, {b})"
        if op == "|+|" or op == "|-|":
            pyop = "+" if op == "|+|" else "-"
            if kind == "u":
                return f"min(max({a} {pyop} {b}, 0), {(1 << w) - 1})"
            if kind == "s":
                return f"min(max({a} {pyop} {b}, {-(1 << (w - 1))}), {(1 << (w - 1)) - 1})"
            return f"({a} {pyop} {b})"
        if op == "<<":
            sh = e.right.const_value
            if kind in ("u", "s"):
                if isinstance(sh, int):
                    if sh >= w:
                        return "0"
                    return wrap(f"{a} << {sh}", kind, w)
                return wrap(f"_shl({a}, {b}, {w})", kind, w)
            return f"({a} << {b})"
        if op == ">>":
            if kind in ("u", "s"):
                sh = e.right.const_value
                if isinstance(sh, int):
                    return f"({a} >> {sh})" if sh < w or kind == "s" else "0"
                return f"({a} >> min({b}, {w}))"
            return f"({a} >> {b})"
        if op == "++":
            lk, lw = scalar_kind(e.left.type)
            rk, rw = scalar_kind(e.right.type)
            if lk == "s":
                a = f"({a} & {(1 << lw) - 1})"
            if rk == "s":
                b = f"({b} & {(1 << rw) - 1})"
            if lk == "b":
                a = f"int({a})"
            if rk == "b":
                b = f"int({b})"
            code = f"(({a} << {rw}) | {b})"
            if kind == "s":
                half = 1 << (w - 1)
                code = f"(({code} ^ {half}) - {half})"
            return code
        raise self.fail(e, f"binary operator {op}")

    def ex_TernaryExpression(self, e: A.TernaryExpression) -> str:
        cond = self.ex(e.cond)
        self.lazy_depth += 1
        try:
            then, other = self.ex(e.then), self.ex(e.else_)
        finally:
            self.lazy_depth -= 1
        return f"({then} if {cond} else {other})"

    def ex_CastExpression(self, e: A.CastExpression) -> str:
        a = self.ex(e.expr)
        tt = strip(e.type_ref.type or e.type)
        st = strip(e.expr.type)
        return self.cast(a, st, tt, e)

    def cast(self, a: str, st: T.P4Type | None, tt: T.P4Type | None, node: Any) -> str:
        if isinstance(tt, T.SerEnumType):
            tt = tt.underlying
        if isinstance(st, T.SerEnumType):
            st = st.underlying
        if isinstance(tt, T.BoolType):
            return f"bool({a})"
        if isinstance(tt, T.BitsType):
            if isinstance(st, T.BoolType):
                return f"int({a})"
            if isinstance(st, T.BitsType) and not st.signed and not tt.signed and st.width <= tt.width:
                return a
            if isinstance(st, T.BitsType) and st.signed and tt.signed and st.width <= tt.width:
                return a
            mask = (1 << tt.width) - 1
            if tt.signed:
                half = 1 << (tt.width - 1)
                return f"((({a} & {mask}) ^ {half}) - {half})"
            return f"({a} & {mask})"
        if isinstance(tt, T.IntType):
            return a
        if tt == st:
            return a
        if isinstance(tt, T.StructLikeType):
            return a
        raise self.fail(node, f"cast from {st} to {tt}")

    def ex_ListExpression(self, e: A.ListExpression) -> str:
        return self.object_from_fields(e, self.fields_tuple(e))

    def ex_StructExpression(self, e: A.StructExpression) -> str:
        return self.object_from_fields(e, self.fields_tuple(e))

    def fields_tuple(self, e: A.ListExpression | A.StructExpression) -> str:
        """The values of a ``{...}`` expression as a Python tuple, in field order."""
        if isinstance(e, A.ListExpression):
            return "(" + "".join(f"{c}, " for c in self.ex_in_order(e.elems)) + ")"
        codes = dict(zip((f.name for f in e.fields), self.ex_in_order([f.value for f in e.fields])))
        t = strip(e.type)
        if isinstance(t, T.StructLikeType):
            return "(" + "".join(f"{codes[n]}, " for n, _ in t.fields) + ")"
        return "(" + "".join(f"{codes[f.name]}, " for f in e.fields) + ")"

    def object_from_fields(self, e: A.Expression, values: str) -> str:
        """A ``{...}`` typed as a struct or header is a value of that type (a function's
        return value, an argument): build a fresh object; tuples stay tuples."""
        if e.type is None or not isinstance(strip(e.type), T.StructLikeType):
            return values
        return self.object_from_fields_of_type(e.type, values)

    def object_from_fields_of_type(self, t: T.P4Type, values: str) -> str:
        layouts = self.gen.layouts
        layouts.env["_object_with_fields"] = _object_with_fields
        return f"_object_with_fields({layouts.new_value_src(t)}, {values})"

    def ex_DontCareExpression(self, e: A.DontCareExpression) -> str:
        return "None"

    def ex_MethodCallExpression(self, e: A.MethodCallExpression) -> str:
        return self.call(e, as_statement=False)

    # subclasses implement call() and table_apply()
    def call(self, e: A.MethodCallExpression, *, as_statement: bool) -> str:  # pragma: no cover
        raise NotImplementedError

    def table_apply(self, e: A.MethodCallExpression) -> tuple[str, str]:  # pragma: no cover
        raise NotImplementedError
