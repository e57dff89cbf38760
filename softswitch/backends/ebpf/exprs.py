"""P4 expressions as C expressions over the per-packet state ``P``.

Every scalar is held in the smallest unsigned C type of its width and every result
is masked back to its width, so wraparound is P4's; what has no such C form
(signed arithmetic, values over 64 bits, run-time stack indexes) is refused by name.
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import (
    MAX_WIDTH,
    cname,
    const,
    fields_of,
    is_signed,
    mask,
    scalar_width,
    sext,
    stack_slots,
    strip,
    wide,
    wide_byte,
)
from softswitch.frontend import ast as A
from softswitch.frontend import types as T


class ExprGen:
    """Expression half of the generator; `scopes` map declarations to C lvalues."""

    scopes: list[dict[Any, str]]
    errors: list[str]
    precomputed: dict[Any, str]     # call nodes whose value sits in a C lvalue (lookahead)
    pipe_fields: list[str]
    layouts: Any
    stack_scratch: dict[str, str]   # element struct -> pipe slot read/written out of range

    def fresh(self, base: str) -> str:  # pragma: no cover - CGen's
        raise NotImplementedError

    # ------------------------------------------------------------ initialisers
    def materialize(self, e: A.Expression) -> tuple[list[str], str]:
        """A header/struct initialiser (``{a, b}``, ``{f = a}``) built in a fresh pipe slot:
        the statements and the slot. Built aside, so ``h = {h.b, h.a}`` reads the old
        ``h``; a header so built is valid (P4 spec 8.11)."""
        t = strip(e.type)
        if not isinstance(t, (T.HeaderType, T.StructType, T.TupleType)):
            raise EbpfUnsupported(e, f"an initialiser of {t}")
        slot = self.fresh("init")
        self.pipe_fields.append(f"{self.layouts.struct_name(t, e)} {slot};")
        return self.init_fields(f"P->{slot}", t, e), f"P->{slot}"

    def init_fields(self, target: str, t: Any, e: A.Expression) -> list[str]:
        if isinstance(e, A.ListExpression):
            values = dict(zip((f for f, _ in fields_of(t)), e.elems))
        elif isinstance(e, A.StructExpression):
            values = {f.name: f.value for f in e.fields}
        else:
            raise EbpfUnsupported(e, f"initialiser {type(e).__name__}")
        lines = [f"__builtin_memset(&{target}, 0, sizeof({target}));"]
        if isinstance(t, T.HeaderType):
            lines.append(f"{target}._valid = 1;")
        for fname, ftype in fields_of(t):
            v = values.get(fname)
            if v is None:
                continue
            ft = strip(ftype)
            dst = f"{target}.{cname(fname)}"
            if isinstance(ft, T.BitsType) and ft.width > MAX_WIDTH:
                scalar_width(ft, v)             # refuses it: no C integer holds it
            if isinstance(ft, (T.HeaderType, T.StructType)):
                if isinstance(v, (A.ListExpression, A.StructExpression)):
                    lines += self.init_fields(dst, ft, v)
                else:
                    lines.append(f"{dst} = {self.lval(v)};")
            else:
                lines.append(f"{dst} = {self.ex(v)};")
        return lines

    def object_value(self, e: A.Expression) -> str:
        """A header/struct value as a C expression (an initialiser: a statement expression)."""
        if isinstance(e, (A.ListExpression, A.StructExpression)):
            lines, slot = self.materialize(e)
            return "({ " + " ".join(lines) + f" {slot}; }})"
        return self.lval(e)

    # ---------------------------------------------------------------- helpers
    def width(self, e: A.Expression) -> int:
        return scalar_width(e.type, e)

    def lookup(self, decl: Any, node: Any) -> str:
        for s in self.scopes:
            if decl in s:
                return s[decl]
        raise EbpfUnsupported(node, f"reference to {getattr(decl, 'name', decl)!r} "
                                    f"({type(decl).__name__})")

    def cond(self, e: A.Expression) -> str:
        return self.ex(e)

    # ----------------------------------------------------------------- values
    def ex(self, e: A.Expression) -> str:
        if e in self.precomputed:
            return self.precomputed[e]
        cv = e.const_value
        if cv is not None and not isinstance(e, A.MethodCallExpression):
            if isinstance(cv, bool):
                return "1" if cv else "0"
            if cv < 0:
                t = strip(e.type)
                if not isinstance(t, T.BitsType):
                    raise EbpfUnsupported(e, f"negative constant {cv} of type {t}")
                return const(cv & ((1 << self.width(e)) - 1))
            if cv >> MAX_WIDTH:
                raise EbpfUnsupported(e, f"constant {cv:#x} wider than {MAX_WIDTH} bits")
            return const(cv)
        if isinstance(e, (A.PathExpression, A.MemberExpression)) and self._is_ref(e):
            return self.lval(e)
        if isinstance(e, A.MemberExpression):
            if e.kind is A.MemberKind.ERROR_MEMBER:
                return f"{self.errors.index(e.member)}"
            if e.kind is A.MemberKind.STACK_LAST_INDEX:
                return f"((u64){self.lval(e.expr)}__next - 1) & 0xffffffffULL"
            if e.kind is A.MemberKind.STACK_SIZE:
                return f"{strip(e.expr.type).size}"
            if e.kind in (A.MemberKind.TABLE_HIT, A.MemberKind.TABLE_MISS):
                call = self.table_call(e.expr)
                return call if e.kind is A.MemberKind.TABLE_HIT else f"(!{call})"
            raise EbpfUnsupported(e, f"member {e.member} ({e.kind.value if e.kind else '?'})")
        if isinstance(e, A.MethodCallExpression):
            return self.call_expr(e)
        if isinstance(e, A.UnaryExpression):
            x = self.ex(e.operand)
            if e.op == "!":
                return f"(!{x})"
            w = self.width(e)
            if e.op == "~":
                return f"((~{x}) & {mask(w)})"
            if e.op == "-":
                return f"((-({wide(w)}){x}) & {mask(w)})"
            if e.op == "+":
                return x
        if isinstance(e, A.BinaryExpression):
            return self._binary(e)
        if isinstance(e, A.TernaryExpression):
            return f"({self.ex(e.cond)} ? {self.ex(e.then)} : {self.ex(e.else_)})"
        if isinstance(e, A.CastExpression):
            return self._cast(e)
        if isinstance(e, A.SliceExpression):
            lo, hi = e.lo_value, e.hi_value
            assert lo is not None and hi is not None
            return f"(({self.ex(e.expr)} >> {lo}) & {mask(hi - lo + 1)})"
        raise EbpfUnsupported(e, f"expression {type(e).__name__}")

    def _is_ref(self, e: A.Expression) -> bool:
        if isinstance(e, (A.PathExpression, A.IndexExpression)):
            return True
        return isinstance(e, A.MemberExpression) and e.kind in (A.MemberKind.FIELD,
                                                                A.MemberKind.STACK_LAST)

    def _binary(self, e: A.BinaryExpression) -> str:
        code = self._binary64(e)
        widths = [self._width_or_0(x) for x in (e, e.left, e.right)]
        if max(widths) <= 64:
            return code
        if e.op in ("*", "/", "%") or e.op in ("<<", ">>") and not isinstance(e.right.const_value, int):
            raise EbpfUnsupported(e, f"operator {e.op} on values over 64 bits (BPF has no 128-bit "
                                     "multiply, divide or variable shift)")
        return code.replace("(u64)", "(u128)")

    def _width_or_0(self, e: A.Expression) -> int:
        t = strip(e.type)
        return t.width if isinstance(t, T.BitsType) else 0

    def _binary64(self, e: A.BinaryExpression) -> str:
        op = e.op
        if is_signed(e.left.type) and op not in ("==", "!=", "&", "|", "^", "+", "-", "*", "++",
                                                 "<<", "&&", "||"):
            return self._signed_binary(e)
        if op in ("&&", "||"):
            return f"({self.ex(e.left)} {op} {self.ex(e.right)})"
        if op in ("==", "!="):
            lt = strip(e.left.type)
            if isinstance(lt, T.VarbitType):
                eq = self.varbit_eq(self.lval(e.left), self.lval(e.right), lt)
                return eq if op == "==" else f"(!{eq})"
            if isinstance(lt, (T.HeaderType, T.StructType, T.StackType, T.HeaderUnionType)):
                eq = self.obj_eq(self.object_value(e.left), self.object_value(e.right), lt, e)
                return eq if op == "==" else f"(!{eq})"
            return f"({self.ex(e.left)} {op} {self.ex(e.right)})"
        if op in ("<", "<=", ">", ">="):
            return f"((u64){self.ex(e.left)} {op} (u64){self.ex(e.right)})"
        if op in ("/", "%"):
            w = self.width(e)
            l, r = self.ex(e.left), self.ex(e.right)
            return f"({{ u64 d_ = (u64){r}; d_ ? ((u64){l} {op} d_) & {mask(w)} : 0ULL; }})"
        w = self.width(e)
        l, r = self.ex(e.left), self.ex(e.right)
        if op == "++":
            rw = self.width(e.right)
            return f"((((u64){l}) << {rw}) | (u64){r})"
        if op in ("&", "|", "^"):
            return f"((u64){l} {op} (u64){r})"
        if op in ("+", "-", "*"):
            return f"(((u64){l} {op} (u64){r}) & {mask(w)})"
        if op in ("<<", ">>"):
            amount = e.right.const_value
            if isinstance(amount, int):
                if amount >= w:
                    return "0ULL"
                if op == ">>":
                    return f"((u64){l} >> {amount})"
                return f"(((u64){l} << {amount}) & {mask(w)})"
            return (f"((u64){r} >= {w} ? 0ULL : (((u64){l} {op} (u64){r}) & {mask(w)}))")
        if op == "|+|":
            return f"(((u64){l} + (u64){r}) > {mask(w)} ? {mask(w)} : ((u64){l} + (u64){r}))"
        if op == "|-|":
            return f"((u64){l} > (u64){r} ? ((u64){l} - (u64){r}) : 0ULL)"
        raise EbpfUnsupported(e, f"operator {op}")

    @staticmethod
    def varbit_eq(a: str, b: str, t: T.VarbitType) -> str:
        """Two varbit values are equal when their lengths and their bytes are."""
        n = t.max_width // 8 + 1
        return (f"({{ int eq_ = {a}__bits == {b}__bits; for (u32 i_ = 0; i_ < {n}; i_++) "
                f"if (i_ < ({a}__bits + 7) / 8 && {a}[i_] != {b}[i_]) eq_ = 0; eq_; }})")

    def union_only_valid(self, member: A.MemberExpression) -> list[str]:
        """``u.m`` became valid (setValid, extract): every other member of ``u`` is invalid."""
        t = strip(member.expr.type)
        base = self.lval(member.expr)
        return [f"{base}.{cname(f)}._valid = 0;" for f, _ in t.fields if f != member.member]

    def obj_eq(self, a: str, b: str, t: Any, node: Any) -> str:
        """``a == b`` of headers (both invalid, or both valid with equal fields), structs
        (every field) and stacks (every element), as the Python target compares them."""
        t = strip(t)
        if isinstance(t, T.StackType):
            return "(" + " && ".join(self.obj_eq(f"{a}[{i}]", f"{b}[{i}]", t.elem, node)
                                     for i in range(t.size)) + ")"
        terms = []
        for fname, ftype in t.fields:
            ft = strip(ftype)
            fa, fb = f"{a}.{cname(fname)}", f"{b}.{cname(fname)}"
            if isinstance(ft, (T.HeaderType, T.StructType, T.StackType, T.HeaderUnionType)):
                terms.append(self.obj_eq(fa, fb, ft, node))
            elif isinstance(ft, T.VarbitType):
                terms.append(self.varbit_eq(fa, fb, ft))
            elif isinstance(ft, T.BitsType) and ft.width > MAX_WIDTH:      # held as its bytes
                terms += [f"({a}.{cname(wide_byte(fname, i))} == {b}.{cname(wide_byte(fname, i))})"
                          for i in range((ft.width + 7) // 8)]
            else:
                terms.append(f"({fa} == {fb})")
        fields = " && ".join(terms) or "1"
        if isinstance(t, T.HeaderType):
            return f"({a}._valid == {b}._valid && (!{a}._valid || ({fields})))"
        return f"({fields})"

    def _signed_binary(self, e: A.BinaryExpression) -> str:
        """int<W> operators whose result depends on the sign: comparisons, ``>>``
        (arithmetic), saturating ``|+|``/``|-|`` and ``/`` (towards zero, 0 for a zero
        divisor, as the Python target)."""
        op = e.op
        lw = self.width(e.left)
        a, b = sext(self.ex(e.left), lw), self.ex(e.right)
        if op in ("<", "<=", ">", ">="):
            return f"({a} {op} {sext(b, self.width(e.right))})"
        w = self.width(e)
        if w > 64:
            return self._signed_binary128(e, a, sext(b, w), w)
        if op == ">>":
            amount = e.right.const_value
            if isinstance(amount, int):
                return f"((u64)({a} >> {min(amount, 63)}) & {mask(w)})"
            return f"({{ u64 n_ = (u64){b}; (u64)({a} >> (n_ > 63 ? 63 : n_)) & {mask(w)}; }})"
        bs = sext(b, w)
        lo, hi = -(1 << (w - 1)), (1 << (w - 1)) - 1
        if op in ("|+|", "|-|"):
            builtin = "__builtin_add_overflow" if op == "|+|" else "__builtin_sub_overflow"
            toward_max = "b_ > 0" if op == "|+|" else "b_ < 0"
            return (f"({{ s64 a_ = {a}, b_ = {bs}, s_; "
                    f"if ({builtin}(a_, b_, &s_)) s_ = {toward_max} ? {hi}LL : {lo}LL - 0; "
                    f"else if (s_ > {hi}LL) s_ = {hi}LL; else if (s_ < {lo}LL) s_ = {lo}LL - 0; "
                    f"(u64)s_ & {mask(w)}; }})".replace(f"{lo}LL - 0", f"(-{hi}LL - 1)"))
        if op == "/":
            return (f"({{ s64 a_ = {a}, b_ = {bs}; u64 ua_ = a_ < 0 ? -(u64)a_ : (u64)a_, "
                    f"ub_ = b_ < 0 ? -(u64)b_ : (u64)b_; u64 q_ = ub_ ? ua_ / ub_ : 0; "
                    f"((a_ < 0) != (b_ < 0) ? -q_ : q_) & {mask(w)}; }})")
        raise EbpfUnsupported(e, f"operator {op} on {strip(e.left.type)}")

    def _signed_binary128(self, e: A.BinaryExpression, a: str, b: str, w: int) -> str:
        """int<65> .. int<128>: sign-extended to clang's ``__int128`` (`sext`). BPF has no
        128-bit divide or variable shift: those are refused by `_binary`."""
        op = e.op
        if op == ">>":
            amount = e.right.const_value
            if isinstance(amount, int):
                return f"((u128)({a} >> {min(amount, 127)}) & {mask(w)})"
            return "0"                      # refused by _binary: no 128-bit variable shift
        if op in ("|+|", "|-|"):
            builtin = "__builtin_add_overflow" if op == "|+|" else "__builtin_sub_overflow"
            toward_max = "b_ > 0" if op == "|+|" else "b_ < 0"
            hi = f"((__int128){const((1 << (w - 1)) - 1)})"
            return (f"({{ __int128 a_ = {a}, b_ = {b}, s_; "
                    f"if ({builtin}(a_, b_, &s_)) s_ = {toward_max} ? {hi} : -{hi} - 1; "
                    f"else if (s_ > {hi}) s_ = {hi}; else if (s_ < -{hi} - 1) s_ = -{hi} - 1; "
                    f"(u128)s_ & {mask(w)}; }})")
        if op == "/":
            return "0"                      # refused by _binary: no 128-bit divide
        raise EbpfUnsupported(e, f"operator {op} on {strip(e.left.type)}")

    def _cast(self, e: A.CastExpression) -> str:
        to = strip(e.type)
        x = self.ex(e.expr)
        frm = strip(e.expr.type)
        if isinstance(to, T.BoolType):
            return f"({x} != 0)"
        if isinstance(to, T.BitsType):
            scalar_width(to, e)
            if is_signed(frm) and strip(frm).width < to.width:   # sign-extend, then cut
                if to.width > 64:
                    return f"((u128)(__int128){sext(x, strip(frm).width)} & {mask(to.width)})"
                return f"((u64){sext(x, strip(frm).width)} & {mask(to.width)})"
            return f"(({wide(to.width)}){x} & {mask(to.width)})"
        raise EbpfUnsupported(e, f"cast to {to}")

    # --------------------------------------------------------------- lvalues
    def lval(self, e: A.Expression) -> str:
        if e in self.precomputed:
            return self.precomputed[e]
        if isinstance(e, A.PathExpression):
            return self.lookup(e.decl, e)
        if isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.FIELD:
            if isinstance(strip(e.type), T.BitsType) and strip(e.type).width > MAX_WIDTH:
                scalar_width(e.type, e)         # refuses it: no C integer holds it
            return f"{self.lval(e.expr)}.{cname(e.member)}"
        if isinstance(e, A.IndexExpression):
            st = strip(e.expr.type)
            idx = e.index.const_value
            if not isinstance(st, T.StackType):
                raise EbpfUnsupported(e, f"indexing {st}")
            if not isinstance(idx, int):
                return self.run_time_index(e, st)
            if not 0 <= idx < st.size:
                raise EbpfUnsupported(e, f"stack index {idx} outside 0..{st.size - 1}")
            return f"{self.lval(e.expr)}[{idx}]"
        if isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.STACK_LAST:
            st = strip(e.expr.type)
            base = self.lval(e.expr)
            return f"{base}[({base}__next - 1) & {stack_slots(st.size) - 1}]"
        from softswitch.frontend.text import expr_text
        if isinstance(e, A.MethodCallExpression) and e.call_kind is A.CallKind.FUNCTION \
                and isinstance(strip(e.type), (T.HeaderType, T.StructType)):
            return self.call_expr(e)            # (fn(P, ...), its result slot)
        if isinstance(e, A.MethodCallExpression):
            raise EbpfUnsupported(e, f"a field of a call's result ({expr_text(e)})")
        raise EbpfUnsupported(e, f"{expr_text(e)} as a value or assignment target")

    def run_time_index(self, e: A.IndexExpression, st: T.StackType) -> str:
        """``s[i]`` with ``i`` known only at run time, as the Python target (and p4c for
        BMv2) does: inside the stack, the element (the index masked to the array's
        power-of-two length, which the verifier needs); outside, a scratch element zeroed
        at each use, so a read sees an invalid header of zeros and a write changes nothing."""
        elem = self.layouts.struct_name(strip(st.elem), e)
        scratch = self.stack_scratch.get(elem)
        if scratch is None:
            scratch = self.stack_scratch[elem] = self.fresh("stack_oob")
            self.pipe_fields.append(f"{elem} {scratch};")
        base = self.lval(e.expr)
        return (f"(*({{ u64 ix = (u64)({self.ex(e.index)}); ix < {st.size} ? "
                f"&{base}[ix & {stack_slots(st.size) - 1}] : "
                f"({{ __builtin_memset(&P->{scratch}, 0, sizeof(P->{scratch})); &P->{scratch}; }}); }}))")

    # implemented by the statement half
    def table_call(self, e: A.Expression) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def call_expr(self, e: A.MethodCallExpression) -> str:  # pragma: no cover - abstract
        raise NotImplementedError
