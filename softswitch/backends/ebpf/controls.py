"""Functions and controls as C: the package's blocks, control instances applied from a
control (and direct ``MyControl.apply(...)``), P4 functions.

A mixin of `blocks.CGen`: a control becomes ``static void ctl_X(struct pipe *P)``;
an instance's parameters live in pipe slots, copied in before and out after each
apply (P4's copy-in/copy-out), so its actions and tables reach them the same way as
the top blocks' ones; functions and actions copy their out/inout scalars in and out
(`callable_params`).
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import Layouts, cname, ctype, scalar_width, strip
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering import LoweredBlock, LoweredProgram

IND = "    "


class ControlGen:
    """Controls and functions; the state and helpers it uses are `CGen`'s."""

    layouts: Layouts
    lowered: LoweredProgram
    scopes: list[dict[Any, str]]
    functions: list[str]
    pipe_fields: list[str]
    instances: dict[Any, tuple[str, str, int, int]]
    function_fns: dict[Any, str]
    exiting_fns: set[str]           # C functions of P4 functions that may exit
    function_results: dict[Any, str]  # FunctionDecl returning a header/struct -> its slot
    result_slot: str | None           # that slot, while its function is generated
    in_function: bool
    _subcontrol_types: set[Any]
    _subcontrol_slots: dict[Any, list[tuple[Any, str]]]
    _prefix: str

    # implemented by CGen / ExprGen (earlier in the method resolution order)
    def fresh(self, base: str) -> str:
        raise NotImplementedError

    def ex(self, e: A.Expression) -> str:
        raise NotImplementedError

    def lval(self, e: A.Expression) -> str:
        raise NotImplementedError

    def stmts(self, items: list[Any]) -> list[str]:
        raise NotImplementedError

    def local_var(self, decl: A.VariableDecl, scope: dict[Any, str]) -> list[str]:
        raise NotImplementedError

    def gen_instance(self, d: A.InstantiationDecl, prefix: str) -> None:
        raise NotImplementedError

    def gen_action(self, decl: A.ActionDecl, prefix: str) -> str:
        raise NotImplementedError

    def gen_table(self, decl: A.TableDecl, prefix: str) -> None:
        raise NotImplementedError

    def slice_store(self, lhs: A.SliceExpression, value: str) -> list[str]:
        raise NotImplementedError

    def materialize(self, e: A.Expression) -> tuple[list[str], str]:
        raise NotImplementedError

    # ----------------------------------------------------------- functions
    def callable_params(self, decl: Any, what: str) -> tuple[list[str], dict[Any, str], list[str],
                                                             list[str]]:
        """C parameters, scope, entry and exit lines of a function or an action, as the
        Python target passes them: an ``out``/``inout`` scalar is copied into a pipe slot
        at entry (``out`` starts at 0) and back through its pointer at every way out,
        ``return`` and ``exit`` alike, in parameter order (so two arguments naming one
        field end with the later one's value); a header or struct is copied in whatever
        its direction (an ``out`` one keeps its value, as the Python target passes it) and
        an ``out``/``inout`` one back (so writes the callee makes to the argument's storage
        another way are overwritten, as with the Python target's copy of an aliased
        argument); an ``in`` scalar by value."""
        params = ["struct pipe *P"]
        scope: dict[Any, str] = {}
        entry: list[str] = []
        leave: list[str] = []
        for p in decl.params:
            t = strip(p.type_ref.type)
            pn = "p_" + cname(p.name)
            directional = p.direction in (A.Direction.OUT, A.Direction.INOUT)
            if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType)):
                sname = self.layouts.struct_name(t, p)
                params.append(f"{sname} *{pn}")
                slot = self.fresh(f"{what}_{p.name}")
                self.pipe_fields.append(f"{sname} {slot};")
                entry.append(f"P->{slot} = *{pn};")
                scope[p] = f"P->{slot}"
                if directional:
                    leave.append(f"*{pn} = P->{slot};")
            elif directional:
                ct = ctype(scalar_width(t, p))
                params.append(f"{ct} *{pn}")
                slot = self.fresh(f"{what}_{p.name}")
                self.pipe_fields.append(f"{ct} {slot};")
                entry.append(f"P->{slot} = {'*' + pn if p.direction is A.Direction.INOUT else '0'};")
                leave.append(f"*{pn} = P->{slot};")
                scope[p] = f"P->{slot}"
            else:
                params.append(f"{ctype(scalar_width(t, p))} {pn}")
                scope[p] = pn
        return params, scope, entry, leave

    def call_args(self, decl: Any, args: list[Any], after: list[str] | None = None) -> list[str]:
        """The C arguments of a call of a function or an action (see `callable_params`);
        a slice given for an out/inout parameter goes through a pipe slot, written back
        into the slice by the statements the call appends to `after` (a call statement)."""
        out = ["P"]
        for p, a in zip(decl.params, args):
            t = strip(p.type_ref.type)
            if isinstance(a.value, A.SliceExpression) and p.direction in (A.Direction.OUT,
                                                                          A.Direction.INOUT):
                if after is None:
                    raise EbpfUnsupported(a, "a slice as an out argument of a call inside an "
                                             "expression or a table's action list")
                w = scalar_width(t, p)
                slot = self.fresh("slice_arg")
                self.pipe_fields.append(f"{ctype(w)} {slot};")
                init = self.ex(a.value) if p.direction is A.Direction.INOUT else "0"
                out.append(f"({{ P->{slot} = {init}; &P->{slot}; }})")
                after += self.slice_store(a.value, f"P->{slot}")
                continue
            if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType)) or \
                    p.direction in (A.Direction.OUT, A.Direction.INOUT):
                if isinstance(a.value, A.DontCareExpression):
                    slot = self.fresh("dontcare")
                    self.pipe_fields.append(
                        f"{self.layouts.struct_name(t, p) if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType)) else ctype(scalar_width(t, p))} {slot};")
                    out.append(f"&P->{slot}")
                elif isinstance(a.value, (A.ListExpression, A.StructExpression)):
                    lines, slot = self.materialize(a.value)
                    out.append("({ " + " ".join(lines) + f" &{slot}; }})")
                else:
                    out.append(f"&({self.lval(a.value)})")
            else:
                out.append(self.ex(a.value))
        return out

    @staticmethod
    def leave_through(body: list[str], label: str, has_value: bool) -> list[str]:
        """`body` with every way out (``return``, ``exit``'s return, the check after a
        call that may exit) turned into a jump to `label`, where the outs are copied back."""
        out = []
        for line in body:
            stripped = line.strip()
            lead = line[:len(line) - len(line.lstrip())]
            if stripped == "return;":
                out.append(f"{lead}goto {label};")
            elif stripped == "if (P->exited) return;":
                out.append(f"{lead}if (P->exited) goto {label};")
            elif has_value and stripped.startswith("return ") and stripped.endswith(";"):
                out.append(f"{lead}{{ rv = {stripped[7:-1]}; goto {label}; }}")
            else:
                out.append(line)
        return out

    def function_fn(self, decl: A.FunctionDecl) -> str:
        """A P4 function as a C function (parameters as `callable_params` says); ``exit``
        inside it sets ``P->exited`` and its callers return after the call."""
        fn = self.function_fns.get(decl)
        if fn is not None:
            return fn
        fn = self.fresh("fn_" + decl.name)
        self.function_fns[decl] = fn
        rt = strip(decl.return_type.type)
        ret_slot = None
        if isinstance(rt, (T.HeaderType, T.StructType, T.HeaderUnionType)):    # returned in a pipe slot
            ret_slot = self.fresh("fr_" + decl.name)
            self.pipe_fields.append(f"{self.layouts.struct_name(rt, decl)} {ret_slot};")
            self.function_results[decl] = f"P->{ret_slot}"
            ret = "void"
        else:
            ret = "void" if isinstance(rt, T.VoidType) else ctype(scalar_width(rt, decl))
        params, scope, entry, leave = self.callable_params(decl, "fa_" + decl.name)
        saved, saved_in, saved_ret = self.scopes, self.in_function, self.result_slot
        self.scopes, self.in_function = [{}, scope], True
        self.result_slot = f"P->{ret_slot}" if ret_slot else None
        try:
            body = self.stmts(decl.body.statements)
        finally:
            self.scopes, self.in_function, self.result_slot = saved, saved_in, saved_ret
        label = f"out_{fn}"
        if any("P->exited" in line for line in body):
            self.exiting_fns.add(fn)
        body = self.leave_through(body, label, ret != "void")
        head = [f"{ret} rv = 0;"] if ret != "void" else []
        tail = [f"{label}:"] + leave + (["return rv;"] if ret != "void" else ["return;"])
        self.functions.append(f"/* function {decl.name} */\n"
                              f"static __always_inline {ret} {fn}({', '.join(params)}) {{\n"
                              + "".join(IND + x + "\n" for x in head + entry + body + tail) + "}")
        return fn

    # ------------------------------------------------------------ controls
    def gen_control(self, block: LoweredBlock, roles: tuple[str, ...]) -> str:
        """A block of the package: its parameters are the pipe's structs, by role."""
        decl = block.decl
        assert isinstance(decl, A.ControlDecl)
        scope = {p: f"P->{role}" for p, role in zip(decl.params, roles) if role != "packet"}
        return self._control(decl, block.name, scope, ["struct pipe *P"], f"ctl_{cname(block.name)}")

    def gen_subcontrol(self, inst: Any, prefix: str, key: Any = None) -> None:
        """A control instance declared in a control (``Sub() s;`` ... ``s.apply(...)``), or
        the anonymous one of a direct ``Sub.apply(...)`` (`inst` the call, `key` where its
        function is filed): a C function over the pipe, its parameters in pipe slots."""
        direct = not isinstance(inst, A.InstantiationDecl)
        decl = inst.callee.expr.decl if direct else inst.type_decl
        ctor_scope = self.ctor_bindings(inst, decl, direct)
        # each instance gets its own function, pipe slots, tables and externs (keyed by
        # the declaration only while its body is generated)
        self._subcontrol_types.add(decl)
        low = self.lowered.at(prefix, inst.callee.expr if direct else inst)
        assert isinstance(low, LoweredBlock), (prefix, decl.name)
        fq = low.name
        key = inst if key is None else key
        # parameters live in the pipe (copy-in/copy-out at each apply, as P4 defines them),
        # so the instance's actions and tables reach them as the top blocks' ones
        scope: dict[Any, str] = dict(ctor_scope)
        slots: list[tuple[Any, str]] = []
        for p in decl.params:
            t = strip(p.type_ref.type)
            slot = self.fresh("sc_" + fq.replace(".", "_") + "_" + p.name)
            if isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType)):
                self.pipe_fields.append(f"{self.layouts.struct_name(t, p)} {slot};")
            else:
                self.pipe_fields.append(f"{ctype(scalar_width(t, p))} {slot};")
            scope[p] = f"P->{slot}"
            slots.append((p, f"P->{slot}"))
        self._subcontrol_slots[key] = slots
        params = ["struct pipe *P"]
        saved = (self.scopes, self._prefix)
        try:
            self.instances[key] = ("control", self._control(decl, fq, scope, params,
                                                             self.fresh("ctl_" + fq)), 0, 0)
        finally:
            self.scopes, self._prefix = saved

    def ctor_bindings(self, inst: Any, decl: Any, direct: bool) -> dict[Any, str]:
        """Constructor arguments of a control instance: a constant becomes the parameter's
        value in the instance's scope; an instance of a control declared in the enclosing
        control (``C2(c1) c2;``) is what the parameter's ``apply`` runs. Bound while this
        instance is generated (each instance of the control gets its own function)."""
        if not decl.ctor_params:
            return {}
        args = [] if direct else list(getattr(inst, "args", None) or [])
        if len(args) != len(decl.ctor_params):
            raise EbpfUnsupported(inst, f"control {decl.name} with constructor arguments "
                                        "other than one per parameter")
        scope: dict[Any, str] = {}
        for p, a in zip(decl.ctor_params, args):
            v = a.value
            target = getattr(v, "decl", None)
            if target is not None and target in self.instances \
                    and self.instances[target][0] == "control":
                self.instances[p] = self.instances[target]
                self._subcontrol_slots[p] = self._subcontrol_slots[target]
            elif isinstance(v.const_value, (bool, int)):
                scope[p] = self.ex(v)
            else:
                raise EbpfUnsupported(a, f"control {decl.name}: constructor argument {p.name} "
                                         "(a constant or an instance of a control of the caller)")
        return scope

    def _control(self, decl: A.ControlDecl, prefix: str, scope: dict[Any, str], params: list[str],
                 fn: str) -> str:
        self.scopes = [scope]
        self._prefix = prefix
        init: list[str] = []
        for d in decl.locals:
            if isinstance(d, A.VariableDecl):
                init += self.local_var(d, scope)
            elif isinstance(d, A.InstantiationDecl) and isinstance(d.type_decl, A.ControlDecl):
                self.gen_subcontrol(d, prefix)
                self.scopes = [scope]
            elif isinstance(d, A.InstantiationDecl):
                self.gen_instance(d, prefix)
        for d in decl.locals:
            if isinstance(d, A.ActionDecl):
                self.gen_action(d, prefix)
        for d in decl.locals:
            if isinstance(d, A.TableDecl):
                self.gen_table(d, prefix)
        body = init + self.stmts(decl.body.statements)
        self.functions.append(f"/* control {prefix} */\n"
                              f"static __always_inline void {fn}({', '.join(params)}) {{\n"
                              + "".join(IND + x + "\n" for x in body) + "}")
        return fn

    def control_call(self, call: A.MethodCallExpression) -> list[str]:
        """``s.apply(args)`` of a sub-control instance; exit inside it ends the caller too."""
        obj = getattr(call.callee, "expr", None)
        key = getattr(obj, "decl", None)
        if isinstance(key, A.ControlDecl):          # direct MyControl.apply(...): its own instance
            key = (self._prefix, id(call))          # in each instance of this control
            if key not in self.instances:
                self.gen_subcontrol(call, self._prefix, key)
        inst = self.instances.get(key)
        if inst is None or inst[0] != "control":
            raise EbpfUnsupported(call, "apply of a control that is not an instance of this control")
        slots = self._subcontrol_slots[key]
        before: list[str] = []
        after: list[str] = []
        for (p, slot), a in zip(slots, call.args):
            t = strip(p.type_ref.type)
            if p.direction is A.Direction.OUT:
                before.append(f"__builtin_memset(&{slot}, 0, sizeof({slot}));")
            elif isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType)):
                before.append(f"{slot} = {self.lval(a.value)};")
            else:
                before.append(f"{slot} = {self.ex(a.value)};")
            if p.direction in (A.Direction.OUT, A.Direction.INOUT):
                after.append(f"{self.lval(a.value)} = {slot};")
        return before + [f"{inst[1]}(P);"] + after + ["if (P->exited) return;"]
