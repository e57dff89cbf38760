"""Statements, actions, controls, table applies, the parser and the deparser as C.

The generated functions take ``struct pipe *P`` (the packet's headers, metadata,
standard metadata and locals, in a per-CPU map cell: too big for the 512-byte BPF
stack) and are all inlined into the tc program. Control flow of P4 maps to C's:
``exit`` sets ``P->exited`` and returns, and every caller returns after a call that
may exit; the parser is a chain of labels (loops are refused: the verifier would
have to bound them).
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.ebpf import v1model as V1
from softswitch.backends.ebpf.controls import ControlGen
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.exprs import ExprGen
from softswitch.backends.ebpf.layout import (
    Layouts,
    cname,
    const,
    ctype,
    scalar_width,
    stack_slots,
    strip,
    wide,
    words16,
)
from softswitch.backends.ebpf.stateful_c import StatefulGen
from softswitch.backends.ebpf.tables_c import (
    TableLayout,
    key_build_c,
    layout_table,
    scan_lookup_c,
    table_c_decls,
    value_fields,
)
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering import LoweredProgram

IND = "    "


class CGen(ExprGen, ControlGen, StatefulGen):
    """Generates the C of one program from its lowered form (names, tables, externs);
    `profiles` are the runtime's action profiles (hash algorithm and width of a selector)."""

    def __init__(self, lowered: LoweredProgram, profiles: dict[str, Any] | None = None) -> None:
        self.lowered = lowered
        self.profiles = dict(profiles or {})
        self.arch = lowered.arch
        self.errors = lowered.errors
        self.layouts = Layouts(top_level=dict(lowered.checked.top_level))
        self.scopes: list[dict[Any, str]] = []
        self.tables: dict[Any, TableLayout] = {}       # TableDecl -> layout (the instance being generated)
        self.table_layouts: dict[str, TableLayout] = {}  # control-plane name -> layout (every instance)
        self.functions: list[str] = []                  # C functions, callees first
        self.pipe_fields: list[str] = []                # locals kept in struct pipe
        self.actions: dict[Any, str] = {}               # ActionDecl -> C function
        self.max_header = 1
        self._n = 0
        self.block_kind = ""
        self.instances: dict[Any, tuple[str, str, int, int]] = {}   # InstantiationDecl -> extern
        self.externs: dict[str, tuple[str, str, int, int]] = {}      # control-plane name -> extern
        self.extern_maps: list[str] = []
        self.precomputed: dict[Any, str] = {}
        self.digests: dict[str, str] = {}      # digest (struct type) name -> ring buffer
        self._table_actions: dict[str, dict[str, Any]] = {}   # table -> action name -> decl
        self.function_fns: dict[Any, str] = {}                  # FunctionDecl -> C function
        self.exiting_fns: set[str] = set()
        self.function_results: dict[Any, str] = {}
        self.result_slot: str | None = None
        self.stack_scratch: dict[str, str] = {}
        self.payload_sum_used = False    # a *_with_payload checksum: P->payload_sum per parse
        self.in_function = False
        self.stack_error = 3
        self._subcontrol_types: set[Any] = set()
        self._subcontrol_slots: dict[Any, list[tuple[Any, str]]] = {}
        self._prefix = ""
        self.requests: set[str] = set()   # v1model requests the program makes (resubmit, recirc)
        self.meters_used = False          # meters_c's types and functions are needed
        self.meter_types: dict[Any, str] = {}   # meter/direct_meter decl -> packets | bytes
        self.value_set_maps: dict[str, str] = {}   # value set (control-plane name) -> map
        self.value_set_fns: dict[Any, str] = {}    # ValueSetDecl -> its C match function

    def fresh(self, base: str) -> str:
        self._n += 1
        return f"{cname(base)}_{self._n}"

    def words16(self, pieces: list[tuple[str, int]]) -> list[str]:
        return words16(pieces)

    # ------------------------------------------------------------- locals
    def local_var(self, decl: A.VariableDecl, scope: dict[Any, str]) -> list[str]:
        """A variable in struct pipe (controls' and actions' locals alike)."""
        name = self.fresh("v_" + decl.name)
        t = strip(decl.type_ref.type)
        if isinstance(t, T.StackType) and isinstance(strip(t.elem), T.HeaderType):
            elem = self.layouts.struct_name(strip(t.elem), decl)
            self.pipe_fields += [f"{elem} {name}[{stack_slots(t.size)}];", f"u32 {name}__next;"]
            scope[decl] = f"P->{name}"
            out = [f"__builtin_memset(&P->{name}, 0, sizeof(P->{name}));", f"P->{name}__next = 0;"]
            if decl.init is not None:
                out += self.copy_stack(f"P->{name}", self.lval(decl.init))
            return out
        if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType, T.TupleType)):
            self.pipe_fields.append(f"{self.layouts.struct_name(t, decl)} {name};")
            scope[decl] = f"P->{name}"
            out = [f"__builtin_memset(&P->{name}, 0, sizeof(P->{name}));"]
            if decl.init is not None:
                out.append(f"P->{name} = {self.object_value(decl.init)};")
            return out
        w = scalar_width(t, decl)
        self.pipe_fields.append(f"{ctype(w)} {name};")
        scope[decl] = f"P->{name}"
        init = self.ex(decl.init) if decl.init is not None else "0"
        return [f"P->{name} = {init};"]

    # --------------------------------------------------------- statements
    def stmts(self, items: list[Any]) -> list[str]:
        out: list[str] = []
        for s in items:
            out += self.stmt(s)
        return out

    def stmt(self, s: Any) -> list[str]:
        if isinstance(s, A.VariableDecl):
            return self.local_var(s, self.scopes[0])
        if isinstance(s, A.ConstDecl):
            return []
        if isinstance(s, A.BlockStatement):
            self.scopes.insert(0, {})
            try:
                body = self.stmts(s.statements)
            finally:
                self.scopes.pop(0)
            return ["{"] + [IND + x for x in body] + ["}"]
        if isinstance(s, A.EmptyStatement):
            return []
        if isinstance(s, A.AssignmentStatement):
            return self.assign(s) + self.exit_check([s.lhs, s.rhs])
        if isinstance(s, A.IfStatement):
            cond = self.cond(s.cond)
            check = [IND + x for x in self.exit_check([s.cond])]
            out = [f"if ({cond}) {{"] + check + [IND + x for x in self.stmt(s.then)] + ["}"]
            if s.else_ is not None or check:
                out[-1] = "} else {"
                out += check + [IND + x for x in (self.stmt(s.else_) if s.else_ is not None else [])] + ["}"]
            return out
        if isinstance(s, A.MethodCallStatement):
            return self.call_stmt(s.call)
        if isinstance(s, A.ExitStatement):
            return ["P->exited = 1;", "return;"]
        if isinstance(s, A.ReturnStatement):
            if s.value is not None and self.result_slot is not None:
                return [f"{self.result_slot} = {self.object_value(s.value)};", "return;"]
            if s.value is not None:
                return [f"return {self.ex(s.value)};"]
            return ["return;"]
        if isinstance(s, A.SwitchStatement):
            return self.switch_stmt(s)
        raise EbpfUnsupported(s, f"statement {type(s).__name__}")

    def exit_check(self, exprs: list[Any]) -> list[str]:
        """``if (P->exited) return;`` after a statement that calls a function that may exit."""
        from softswitch.frontend.walk import walk
        for e in exprs:
            for node in walk(e):
                if isinstance(node, A.MethodCallExpression) and node.call_kind is A.CallKind.FUNCTION \
                        and self.function_fns.get(node.callee_decl) in self.exiting_fns:
                    return ["if (P->exited) return;"]
        return []

    def stack_shift(self, call: A.MethodCallExpression, obj: A.Expression, m: str) -> list[str]:
        """push_front(n) / pop_front(n): move the elements, invalidate the freed ones."""
        st = strip(obj.type)
        n = call.args[0].value.const_value if call.args else None
        if not isinstance(st, T.StackType) or not isinstance(n, int):
            raise EbpfUnsupported(call, f"{m} with a count known only at run time")
        size, s = st.size, self.lval(obj)
        out = []
        if m == "push_front":
            for i in range(size - 1, -1, -1):
                out.append(f"{s}[{i}] = {s}[{i - n}];" if i >= n else f"{s}[{i}]._valid = 0;")
            out.append(f"{s}__next = {s}__next + {n} > {size} ? {size} : {s}__next + {n};")
        else:
            for i in range(size):
                out.append(f"{s}[{i}] = {s}[{i + n}];" if i + n < size else f"{s}[{i}]._valid = 0;")
            out.append(f"{s}__next = {s}__next > {n} ? {s}__next - {n} : 0;")
        return out

    def switch_stmt(self, s: A.SwitchStatement) -> list[str]:
        """``switch (t.apply().action_run)`` or on a value: an if-chain; labels without a
        body fall through to the next body."""
        e = s.expr
        if isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.TABLE_ACTION_RUN:
            lay = self.tables.get(getattr(e.expr, "callee_decl", None))
            if lay is None:
                raise EbpfUnsupported(e, "action_run of a table of another control")
            head = [f"u64 sw = ({self.table_call(e.expr)}, P->action_run);", "if (P->exited) return;"]
            names = {d: n for n, d in self._table_actions.get(lay.name, {}).items()}

            def label(lbl: A.Expression) -> str:
                name = names.get(getattr(lbl, "decl", None))
                if name is None:
                    raise EbpfUnsupported(lbl, "switch label that is not an action of the table")
                return str(lay.action_ids[name])
        else:
            head = [f"u64 sw = {self.ex(e)};"]

            def label(lbl: A.Expression) -> str:
                return self.ex(lbl)
        out = ["{"] + [IND + x for x in head]
        pending: list[str] = []
        default_body: list[str] | None = None
        first = True
        for case in s.cases:
            if case.label is None:                   # default
                pending.append("1")
            else:
                assert case.label is not None
                pending.append(f"sw == {label(case.label)}")
            if case.body is None:
                continue
            body = self.stmt(case.body)
            if "1" in pending:
                default_body = body
                pending = []
                continue
            out.append(IND + ("if" if first else "else if") + f" ({' || '.join(pending)}) {{")
            out += [IND * 2 + x for x in body] + [IND + "}"]
            first = False
            pending = []
        if default_body is not None:
            out += [IND + ("{" if first else "else {")] + [IND * 2 + x for x in default_body] + [IND + "}"]
        return out + ["}"]

    def assign(self, s: A.AssignmentStatement) -> list[str]:
        """P4 evaluates the target before the right side: when the right side calls
        something, the target's run-time indexes are computed first (once, also when a
        compound assignment shares them with the right side), as on the Python target."""
        from softswitch.frontend.walk import walk
        pinned: list[Any] = []
        head: list[str] = []
        if any(isinstance(n, A.MethodCallExpression) and n.call_kind is not A.CallKind.BUILTIN_METHOD
               for n in walk(s.rhs)):
            for n in walk(s.lhs):
                if isinstance(n, A.IndexExpression) and n.index.const_value is None \
                        and n.index not in self.precomputed:
                    slot = self.fresh("ix")
                    self.pipe_fields.append(f"u64 {slot};")
                    head.append(f"P->{slot} = {self.ex(n.index)};")
                    self.precomputed[n.index] = f"P->{slot}"
                    pinned.append(n.index)
        try:
            return head + self._assign(s)
        finally:
            for n in pinned:
                del self.precomputed[n]

    @staticmethod
    def copy_stack(dst: str, src: str) -> list[str]:
        """A header stack assigned whole: its elements and its next index."""
        return [f"__builtin_memcpy(&{dst}, &{src}, sizeof({dst}));", f"{dst}__next = {src}__next;"]

    def _assign(self, s: A.AssignmentStatement) -> list[str]:
        lhs, rhs = s.lhs, s.rhs
        t = strip(lhs.type)
        if isinstance(t, T.StackType):
            return self.copy_stack(self.lval(lhs), self.lval(rhs))
        if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType, T.TupleType)):
            if isinstance(rhs, (A.ListExpression, A.StructExpression)):
                lines, slot = self.materialize(rhs)
                return lines + [f"{self.lval(lhs)} = {slot};"]
            return [f"{self.lval(lhs)} = {self.object_value(rhs)};"]
        if isinstance(lhs, A.SliceExpression):
            return self.slice_store(lhs, self.ex(rhs))
        return [f"{self.lval(lhs)} = {self.ex(rhs)};"]

    def slice_store(self, lhs: A.SliceExpression, value: str) -> list[str]:
        """``x[hi:lo] = value`` (nested slices are bits of the innermost base)."""
        lo, hi = lhs.lo_value, lhs.hi_value
        assert lo is not None and hi is not None
        m = (1 << (hi - lo + 1)) - 1
        base = lhs.expr
        while isinstance(base, A.SliceExpression):    # x[7:4][3:0]: bits of x
            assert base.lo_value is not None
            lo += base.lo_value
            base = base.expr
        wt = wide(self.width(base))
        target = self.lval(base)
        bits = f"((({wt}){const(m)}) << {lo})"
        return [f"{target} = ({target} & ~{bits}) | ((({wt})({value}) << {lo}) & {bits});"]

    # --------------------------------------------------------------- calls
    def call_stmt(self, call: A.MethodCallExpression) -> list[str]:
        kind = call.call_kind
        if kind is A.CallKind.BUILTIN_METHOD:
            m = call.callee.member  # type: ignore[attr-defined]
            obj = call.callee.expr  # type: ignore[attr-defined]
            if m in ("setValid", "setInvalid"):
                if not isinstance(strip(obj.type), T.HeaderType):
                    raise EbpfUnsupported(call, f"{m} on {obj.type}")
                others: list[str] = []
                if m == "setValid" and isinstance(obj, A.MemberExpression) \
                        and isinstance(strip(obj.expr.type), T.HeaderUnionType):
                    others = self.union_only_valid(obj)
                return others + [f"{self.lval(obj)}._valid = {1 if m == 'setValid' else 0};"]
            if m == "isValid":
                return []
            if m in ("push_front", "pop_front"):
                return self.stack_shift(call, obj, m)
            raise EbpfUnsupported(call, f"built-in method {m}")
        if kind is A.CallKind.ACTION:
            fn = self.action_fn(call.callee_decl)
            after: list[str] = []
            args = self.call_args(call.callee_decl, call.args, after)
            return [f"{fn}({', '.join(args)});"] + after + ["if (P->exited) return;"]
        if kind is A.CallKind.TABLE_APPLY:
            return [f"{self.table_call(call)};", "if (P->exited) return;"]
        if kind is A.CallKind.FUNCTION:
            after = []
            fn = self.function_fn(call.callee_decl)
            line = f"{fn}({', '.join(self.call_args(call.callee_decl, call.args, after))});"
            return [line] + after + self.exit_check([call])
        if kind is A.CallKind.CONTROL_APPLY:
            return self.control_call(call)
        if kind is A.CallKind.EXTERN_FUNCTION:
            lowered = V1.lower_extern(self, call)
            if lowered is None:
                raise EbpfUnsupported(call, f"extern {getattr(call.callee_decl, 'name', '?')}")
            return lowered
        if kind is A.CallKind.EXTERN_METHOD:
            if V1.extern_method_is_noop(self, call):
                return []
            lowered = self.extern_method(call)
            if lowered is not None:
                return lowered
            obj = getattr(call.callee, "expr", None)
            ext = getattr(getattr(getattr(obj, "decl", None), "type_decl", None), "name", None)
            raise EbpfUnsupported(call, f"extern method {ext}.{getattr(call.callee, 'member', '?')}")
        raise EbpfUnsupported(call, f"call ({kind.value if kind else '?'})")

    def call_expr(self, e: A.MethodCallExpression) -> str:
        if e.call_kind is A.CallKind.BUILTIN_METHOD and getattr(e.callee, "member", "") == "isValid":
            obj = e.callee.expr  # type: ignore[attr-defined]
            ot = strip(obj.type)
            if isinstance(ot, T.HeaderUnionType):        # valid when a member is
                base = self.lval(obj)
                return "(" + " || ".join(f"{base}.{cname(f)}._valid" for f, _ in ot.fields) + ")"
            if not isinstance(ot, T.HeaderType):
                raise EbpfUnsupported(e, f"isValid on {obj.type}")
            return f"{self.lval(obj)}._valid"
        if e.call_kind is A.CallKind.FUNCTION:
            fn = self.function_fn(e.callee_decl)
            call = f"{fn}({', '.join(self.call_args(e.callee_decl, e.args))})"
            slot = self.function_results.get(e.callee_decl)
            return f"({call}, {slot})" if slot else call
        raise EbpfUnsupported(e, f"call in an expression ({e.call_kind.value if e.call_kind else '?'})")

    # ------------------------------------------------------------- actions
    def action_fn(self, decl: A.ActionDecl) -> str:
        """The C function of an action; top-level actions (NoAction) are made on first use."""
        fn = self.actions.get(decl)
        if fn is None:
            saved = self.scopes
            self.scopes = [{}]
            try:
                fn = self.gen_action(decl, "")
            finally:
                self.scopes = saved
        return fn

    def gen_action(self, decl: A.ActionDecl, prefix: str) -> str:
        name = self.lowered.action(prefix, decl).name
        fn = self.fresh("act_" + name)
        self.actions[decl] = fn
        params, scope, entry, leave = self.callable_params(decl, "aa_" + decl.name)
        self.scopes.insert(0, scope)
        try:
            body = self.stmts(decl.body.statements)
        finally:
            self.scopes.pop(0)
        if leave or entry:
            label = f"out_{fn}"
            body = entry + self.leave_through(body, label, False) + [f"{label}:"] + leave + ["return;"]
        self.functions.append(f"/* action {name} */\n"
                              f"static __always_inline void {fn}({', '.join(params)}) {{\n"
                              + "".join(IND + x + "\n" for x in body) + "}")
        return fn

    # -------------------------------------------------------------- tables
    def gen_table(self, decl: A.TableDecl, prefix: str) -> None:
        low = self.lowered.table(prefix, decl)
        name = low.name
        lay = layout_table(low, "tbl_" + cname(name.replace(".", "_")))
        self.tables[decl] = lay
        self.table_layouts[name] = lay
        lay.c_decls = table_c_decls(lay)
        keys = [self.ex(k.expr) for k in low.keys]
        by_name: dict[str, A.ActionDecl] = {r.name: r.action.decl for r in low.actions}
        if low.default is not None:   # NoAction too, when the table names no default
            by_name.setdefault(low.default.name, low.default.action.decl)
        self._table_actions[name] = by_name
        t = lay.cname
        lines = [f"static __always_inline u8 {t}_apply(struct pipe *P) {{"]
        if lay.map_kind == "scan":
            lines += [IND + x for x in scan_lookup_c(lay, keys)]
        else:
            lines += [f"    struct {t}_key k = {{}};"]
            lines += [IND + x for x in key_build_c(lay, keys)]
            lines += [f"    struct {t}_value *v = {t}.lookup(&k);"]
        lines += ["    u8 hit = v != 0;",
                  "    P->action_run = 0;",
                  "    if (!v) {", "        u32 z = 0;", f"        v = {t}_def.lookup(&z);",
                  "        if (!v) return 0;", "    }"]
        on_hit: list[str] = []
        if lay.has_counters:
            on_hit += [f"struct counter_cell *c = {t}_ctr.lookup(&v->slot);",
                       "if (c) {", "    __sync_fetch_and_add(&c->packets, 1);",
                       "    __sync_fetch_and_add(&c->bytes, P->pkt_len);", "}"]
        if lay.has_meter:
            on_hit += self.direct_meter_c(decl, name, t)
        if on_hit:
            lines += ["    else {"] + [IND * 2 + x for x in on_hit] + ["    }"]
        if lay.profile is not None:
            lines += [IND + x for x in self.indirect_c(decl, name, lay)]
            lines += ["    P->action_run = act;", "    switch (act) {"]
        else:
            lines += ["    P->action_run = v->action;", "    switch (v->action) {"]
        for aname, aid in lay.action_ids.items():
            found = by_name.get(aname)
            if found is None and aname == "NoAction":   # the default of a table that names none
                found = self.layouts.top_level.get("NoAction")
            if found is None:
                raise EbpfUnsupported(decl, f"table {name}: action {aname} not found")
            ad = found
            fn = self.action_fn(ad)
            data = [p for p in ad.params if p.direction is A.Direction.NONE]
            refs = [r.ref for r in low.actions if r.action.decl is ad]
            bound = [p for p in ad.params if p.direction is not A.Direction.NONE]
            if bound and not refs:
                raise EbpfUnsupported(decl, f"table {name}: action {ad.name} with directional "
                                            "parameters and no arguments for them")
            # the table's action list binds the directional parameters (``a(hdr.f)``)
            args = self.call_args(ad, list(refs[0].args)[:len(bound)]) if bound else ["P"]
            args += [f"v->{path}" for _, path in value_fields(lay, aname)][:len(data)]
            lines.append(f"    case {aid}: {fn}({', '.join(args)}); break;  /* {aname} */")
        lines += ["    }", "    return hit;", "}"]
        self.functions.append("\n".join(lines))

    def table_call(self, e: A.Expression) -> str:
        if not (isinstance(e, A.MethodCallExpression) and e.call_kind is A.CallKind.TABLE_APPLY):
            raise EbpfUnsupported(e, "table result of something other than t.apply()")
        decl = e.callee_decl
        lay = self.tables.get(decl)
        if lay is None:
            raise EbpfUnsupported(e, f"table {getattr(decl, 'name', '?')} of another control")
        return f"{lay.cname}_apply(P)"

    # ------------------------------------------------------------ digests
    def digest(self, call: A.MethodCallExpression) -> list[str]:
        """``digest<T>(receiver, data)``: T's fields into a ring buffer per digest type
        (named as the Python target's queue: T's name), read by the runtime."""
        data = call.args[-1].value
        t = strip(data.type)
        if not isinstance(t, T.StructType):
            raise EbpfUnsupported(call, f"digest of {t} (a struct of bit<W> fields)")
        widths = [(f, scalar_width(ft, call)) for f, ft in t.fields]
        if any(w > 64 for _, w in widths):
            raise EbpfUnsupported(call, f"digest of {t.name}: a field over 64 bits (not yet)")
        ring = "dg_" + cname(t.name)
        if t.name not in self.digests:
            self.digests[t.name] = ring
            self.layouts.decls.append(f"struct {ring}_t {{ "
                                      + " ".join(f"u64 {cname(f)};" for f, _ in widths) + " };")
            self.extern_maps.append(f"BPF_RINGBUF_OUTPUT({ring}, 8);")
            self.pipe_fields.append(f"struct {ring}_t {ring}_buf;")
        if isinstance(data, (A.ListExpression, A.StructExpression)):
            elems = data.elems if isinstance(data, A.ListExpression) else [f.value for f in data.fields]
            values = [self.ex(e) for e in elems]
        else:
            base = self.lval(data)
            values = [f"{base}.{cname(f)}" for f, _ in widths]
        out = [f"P->{ring}_buf.{cname(f)} = {v};" for (f, _), v in zip(widths, values)]
        return out + [f"{ring}.ringbuf_output(&P->{ring}_buf, sizeof(P->{ring}_buf), 0);"]

    # ------------------------------------------------------ counters, registers
    def gen_instance(self, d: A.InstantiationDecl, prefix: str) -> None:
        """A counter or register as a BPF array; direct counters live with their table."""
        ext = self.lowered.at(prefix, d)
        tname = ext.type_name if ext is not None else getattr(d.type_decl, "name", "?")
        if tname in ("direct_counter", "action_profile", "action_selector"):
            return    # their cells live with the table that names them
        if tname in ("meter", "direct_meter"):
            self.gen_meter(d, prefix, tname)
            return
        if tname not in ("counter", "register"):
            raise EbpfUnsupported(d, f"instance {d.name} of {tname}")
        size = ext.const_arg(0)
        if size is None or size <= 0:
            raise EbpfUnsupported(d, f"{tname} {d.name}: size must be a positive constant")
        name = ext.name
        mapname = self.fresh(("ctr_" if tname == "counter" else "reg_") + name.replace(".", "_"))
        if tname == "counter":
            self.extern_maps.append(f"BPF_ARRAY({mapname}, struct counter_cell, {size});")
            width = 0
        else:
            width = scalar_width(ext.type_args[0] if ext.type_args else None, d)
            if width > 64:
                raise EbpfUnsupported(d, f"register {d.name} of {width}-bit cells (over 64 bits: not yet)")
            self.extern_maps.append(f"BPF_ARRAY({mapname}, u64, {size});")
        self.instances[d] = (tname, mapname, size, width)
        self.externs[name] = (tname, mapname, size, width)

    def extern_method(self, call: A.MethodCallExpression) -> list[str] | None:
        """``c.count(i)``, ``r.read(out v, i)``, ``r.write(i, v)``, ``m.execute_meter(i, out
        c)``, ``dm.read(out c)``; None if not one of these."""
        obj = getattr(call.callee, "expr", None)
        inst = self.instances.get(getattr(obj, "decl", None))
        if inst is None:
            return None
        kind, mapname, size, width = inst
        member = getattr(call.callee, "member", "")
        args = [a.value for a in call.args]
        if kind in ("meter", "direct_meter"):
            return self.meter_method(obj, inst, member, args)
        if kind == "counter" and member == "count":
            return ["{", f"    u32 i = (u32)({self.ex(args[0])});",
                    f"    struct counter_cell *c = i < {size} ? {mapname}.lookup(&i) : 0;",
                    "    if (c) {", "        __sync_fetch_and_add(&c->packets, 1);",
                    "        __sync_fetch_and_add(&c->bytes, P->pkt_len);", "    }", "}"]
        if kind == "register" and member == "read":
            return ["{", f"    u32 i = (u32)({self.ex(args[1])});",
                    f"    u64 *c = i < {size} ? {mapname}.lookup(&i) : 0;",
                    f"    {self.lval(args[0])} = c ? (*c & {(1 << width) - 1:#x}ULL) : 0;", "}"]
        if kind == "register" and member == "write":
            return ["{", f"    u32 i = (u32)({self.ex(args[0])});",
                    f"    u64 *c = i < {size} ? {mapname}.lookup(&i) : 0;",
                    f"    if (c) *c = (u64)({self.ex(args[1])}) & {(1 << width) - 1:#x}ULL;", "}"]
        return None
