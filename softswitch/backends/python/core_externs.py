"""Calls of externs: core.p4's own, and the architecture's through its plug-in.

The language's core library is lowered here (``packet_in.extract`` /
``lookahead`` / ``advance`` / ``length``, ``packet_out.emit``, ``verify``,
``static_assert``): every architecture shares it. Any other extern function,
method or type is the architecture's: the call goes to the lowering the
`Architecture` object supplies (see `softswitch.architecture`), which
uses the helpers below (`field_list`, `pack_fields`, `bind`, `digest_queue`).
"""
from __future__ import annotations

from typing import Any

from softswitch.architecture import ExternCall
from softswitch.backends.python.arch_lowering import python_call
from softswitch.backends.python.exprs import ExprCompiler, scalar_kind
from softswitch.backends.python.layout import attr_name, strip
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.lowering.model import ERROR_WIDTH


def from_bits(code: str, kind: str, w: int) -> str:
    """The value of `w` bits read from a packet (`code`, unsigned) as a scalar of `kind`."""
    if kind == "s":
        half = 1 << (w - 1)
        return f"(({code} ^ {half}) - {half})"
    return f"bool({code})" if kind == "b" else code


class ExternCalls(ExprCompiler):
    """Mixin of BodyCompiler: extern calls (core ones inline, the rest delegated)."""

    gen: Any
    block: str
    indent: int

    def args(self, e: A.MethodCallExpression) -> list[A.Expression]:  # pragma: no cover
        raise NotImplementedError

    def assign(self, lhs: A.Expression, code: str) -> None:  # pragma: no cover
        raise NotImplementedError

    def trace(self, kind: str, detail: str) -> None:  # pragma: no cover
        raise NotImplementedError

    # ------------------------------------------------------ architecture calls
    def call_architecture(self, name: str, e: A.MethodCallExpression, *, obj: str | None,
                          as_statement: bool) -> str:
        """Lower a call of the architecture's extern `name` through its plug-in."""
        arch = self.gen.arch
        sem = arch.semantics(name)
        lower = python_call(arch, name)
        if sem is None or lower is None:
            kind = "extern method" if obj is not None else "extern function"
            raise self.fail(e, f"{kind} {name} (not one of architecture {arch.name})")
        return str(lower(self, ExternCall(semantics=sem, node=e, args=self.args(e), obj=obj,
                                          as_statement=as_statement)))

    def bind(self, name: str, obj: Any) -> str:
        """Make `obj` reachable from generated code as `name`."""
        self.gen.env[name] = obj
        return name

    def digest_queue(self, data: A.Expression) -> str:
        return str(self.gen.digest_queue(data))

    def pack_fields(self, data: A.Expression, *, payload: bool = False) -> str:
        """Code of the bytes of field list `data`, padded to whole bytes at the end
        (with ``payload``, the packet's unparsed payload follows)."""
        codes, widths = self.field_list(data)
        if any(isinstance(w, str) for w in widths):
            packed = (f"{self.gen.fields_bytes_fn()}(({', '.join(codes)},), "
                      f"({', '.join(str(w) for w in widths)},))")
        else:
            total = sum(int(w) for w in widths)
            pad = (-total) & 7
            shift = total + pad
            terms = []
            for c, w in zip(codes, widths):
                shift -= int(w)
                terms.append(f"({c} << {shift})" if shift else c)
            packed = f"({' | '.join(terms) or '0'}).to_bytes({(total + pad) // 8}, 'big')"
        return f"({packed} + PK.payload)" if payload else packed

    # -------------------------------------------------------- core functions
    def call_extern_function(self, e: A.MethodCallExpression, as_statement: bool) -> str:
        name = getattr(e.callee_decl, "name", None) or expr_text(e.callee)
        a = self.args(e)
        if name == "verify":
            cond, err = a
            self.emit(f"if not {self.ex(cond)}: raise _perr({self.ex(err)})")
            return ""
        if name == "static_assert":
            return "" if as_statement else "True"
        return self.call_architecture(name, e, obj=None, as_statement=as_statement)

    def call_extern_method(self, e: A.MethodCallExpression, as_statement: bool) -> str:
        """packet_in / packet_out methods inline; other extern types' methods go to the
        architecture as ``"<type>.<method>"``."""
        callee = e.callee
        assert isinstance(callee, A.MemberExpression)
        obj_t = strip(callee.expr.type)
        ext = obj_t.name if isinstance(obj_t, T.ExternType) else str(obj_t)
        m = callee.member
        a = self.args(e)
        obj = self.ex(callee.expr)
        if ext == "packet_in":
            if m == "extract":
                target = a[0]
                extra = f", {self.ex(a[1])}" if len(a) > 1 else ""
                path = expr_text(target)
                if isinstance(target, A.DontCareExpression):  # extract<H>(_): read and drop
                    ht = strip((e.type_bindings or {}).get("T"))
                    if not isinstance(ht, T.HeaderType):
                        raise self.fail(e, "extract into _ of a type that is not a header")
                    h = self.tmp("h")
                    self.emit(f"{h} = {self.gen.layouts.new_value_src(ht)}")
                    self.emit(f"{h}._extract({obj}{extra})")
                    return ""
                member = target if isinstance(target, A.MemberExpression) else None
                union_member = member is not None and \
                    isinstance(strip(member.expr.type), T.HeaderUnionType)
                if member is not None and member.kind is A.MemberKind.STACK_NEXT:
                    st = self.ex(member.expr)
                    h = self.tmp("h")
                    self.emit(f"{h} = {st}.next()")
                    self.emit(f"{h}._extract({obj}{extra})")
                    self.emit(f"{st}.next_index += 1")
                elif member is not None and union_member and \
                        isinstance(member.expr, A.MemberExpression) and \
                        member.expr.kind is A.MemberKind.STACK_NEXT:
                    # u.next.member of a header-union stack: fills the next union, moves on
                    st = self.ex(member.expr.expr)
                    un, h = self.tmp("u"), self.tmp("h")
                    self.emit(f"{un} = {st}.next()")
                    self.emit(f"{h} = {un}.{attr_name(member.member)}")
                    self.emit(f"{h}._extract({obj}{extra})")
                    self.emit(f"{un}._only_valid({attr_name(member.member)!r})")
                    self.emit(f"{st}.next_index += 1")
                else:
                    h = self.tmp("h")
                    self.emit(f"{h} = {self.ex(target)}")
                    self.emit(f"{h}._extract({obj}{extra})")
                    if member is not None and union_member:  # one valid member at a time
                        self.emit(f"{self.ex(member.expr)}._only_valid({attr_name(member.member)!r})")
                self.trace("extract", f"{{'header': {path!r}, 'fields': {h}._fields()}}")
                return ""
            if m == "lookahead":
                t = strip(e.type)
                if isinstance(t, (T.BitsType, T.BoolType, T.SerEnumType)):
                    kind, w = scalar_kind(t)
                    return from_bits(f"{obj}.peek({w})", kind, w)
                if isinstance(t, T.HeaderType):
                    return f"_lookahead_hdr({obj}, {self.gen.layouts.class_ref(t)})"
                if isinstance(t, T.StructType):
                    return self.lookahead_struct(e, obj, t)
                raise self.fail(e, f"lookahead of type {t}")
            if m == "advance":
                self.emit(f"{obj}.advance({self.ex(a[0])})")
                return ""
            if m == "length":
                return f"({obj}.nbits >> 3)"
        if ext == "packet_out" and m == "emit":
            if isinstance(strip(a[0].type), T.HeaderType):
                h = self.tmp("h")  # test validity inline: most headers of a packet are invalid
                self.emit(f"{h} = {self.ex(a[0])}")
                self.emit(f"if {h}._valid: {h}._emit({obj})")
            else:
                self.emit(f"{self.ex(a[0])}._emit({obj})")
            return ""
        return self.call_architecture(f"{ext}.{m}", e, obj=obj, as_statement=as_statement)

    def lookahead_struct(self, e: A.Expression, reader: str, t: T.StructType) -> str:
        """``lookahead<S>()`` of a struct of fixed-width fields: one peek of all its
        bits, cut into the fields (nested structs and headers too; headers come out valid)."""
        try:
            total = T.bit_width(t)
        except ValueError:
            raise self.fail(e, f"lookahead of type {t} (it has no fixed width)") from None
        v = self.tmp("la")
        self.emit(f"{v} = {reader}.peek({total})")
        pos = [total]

        def fields_of(st: T.StructLikeType) -> str:
            items = []
            for _, ft in st.fields:
                ft = T.strip_newtype(ft)
                if isinstance(ft, T.StructLikeType) and not isinstance(ft, T.HeaderUnionType):
                    items.append(fields_of(ft))
                    continue
                kind, w = scalar_kind(ft)
                if kind not in ("u", "s", "b"):
                    raise self.fail(e, f"lookahead of type {t}: field of type {ft}")
                pos[0] -= w
                items.append(from_bits(f"(({v} >> {pos[0]}) & {(1 << w) - 1})", kind, w))
            values = "(" + "".join(f"{x}, " for x in items) + ")"
            if isinstance(st, T.HeaderType):
                return self.object_from_fields_of_type(st, values)
            return values

        return self.object_from_fields_of_type(t, fields_of(t))

    def field_list(self, data: A.Expression) -> tuple[list[str], list[int | str]]:
        """Flatten a field list argument into (value codes, widths).

        A width is an int, or the code of the current width of a varbit field
        (as BMv2 does, a varbit contributes the bits it holds now: IPv4 options
        in a header checksum)."""
        codes: list[str] = []
        widths: list[int | str] = []

        def add(code: str, t: T.P4Type | None) -> None:
            t = strip(t)
            if isinstance(t, T.StructLikeType):
                for fname, ft in t.fields:
                    if isinstance(T.strip_newtype(ft), T.VarbitType):
                        codes.append(f"{code}.{attr_name(fname)}")
                        widths.append(f"{code}._vw_{attr_name(fname)}")
                        continue
                    add(f"{code}.{attr_name(fname)}", ft)
                return
            if isinstance(t, T.VarbitType):
                obj, _, fld = code.rpartition(".")
                if not obj:
                    raise self.fail(data, f"varbit value {code} in a field list")
                codes.append(code)
                widths.append(f"{obj}._vw_{fld}")
                return
            if isinstance(t, T.StackType):
                for i in range(t.size):
                    add(f"{code}.elems[{i}]", t.elem)
                return
            if isinstance(t, (T.ErrorType, T.EnumType)):
                # an error is its code and a plain enum member its position, each in 32
                # bits as BMv2 keeps them (a digest carrying a parser error or an enum)
                codes.append(code)
                widths.append(ERROR_WIDTH)
                return
            kind, w = scalar_kind(t)
            if kind == "b":
                code = f"int({code})"
            elif kind == "s":
                code = f"({code} & {(1 << w) - 1})"
            elif kind not in ("u",):
                raise self.fail(data, f"field of type {t} in a field list")
            codes.append(code)
            widths.append(w)

        if isinstance(data, A.ListExpression):
            for x in data.elems:
                if isinstance(x, A.ListExpression):
                    c, w = self.field_list(x)
                    codes += c
                    widths += w
                else:
                    add(self.ex(x), x.type)
        elif isinstance(data, A.StructExpression):
            for f in data.fields:
                add(self.ex(f.value), f.value.type)
        else:
            add(self.ex(data), data.type)
        return codes, widths
