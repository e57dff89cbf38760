"""Functions and controls as C: the package's blocks, control instances applied from a
control (and direct ``MyControl.apply(...)``), P4 functions.

A mixin of `blocks.CGen`: a control becomes ``static void ctl_X(struct pipe *P)``;
an instance's parameters live in pipe slots, copied in before and out after each
apply (P4's copy-in/copy-out), so its actions and tables reach them the same way as
the top blocks' ones; a function takes scalars by value and out/inout scalars and
headers by pointer (it has no actions or tables that would need them).
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

    # ----------------------------------------------------------- functions
    def function_fn(self, decl: A.FunctionDecl) -> str:
        """A P4 function as a C function: scalars in by value, out/inout scalars and every
        header or struct by pointer (an ``in`` header it writes would differ: refused)."""
        fn = self.function_fns.get(decl)
        if fn is not None:
            return fn
        fn = self.fresh("fn_" + decl.name)
        self.function_fns[decl] = fn
        rt = strip(decl.return_type.type)
        ret = "void" if isinstance(rt, T.VoidType) else ctype(scalar_width(rt, decl))
        scope: dict[Any, str] = {}
        params = ["struct pipe *P"]
        for p in decl.params:
            t = strip(p.type_ref.type)
            pn = "p_" + cname(p.name)
            if isinstance(t, (T.HeaderType, T.StructType)):
                params.append(f"{self.layouts.struct_name(t, p)} *{pn}")
                scope[p] = f"(*{pn})"
            elif p.direction in (A.Direction.OUT, A.Direction.INOUT):
                params.append(f"{ctype(scalar_width(t, p))} *{pn}")
                scope[p] = f"(*{pn})"
            else:
                params.append(f"{ctype(scalar_width(t, p))} {pn}")
                scope[p] = pn
        from softswitch.frontend.walk import walk
        for node in walk(decl.body):
            if isinstance(node, A.AssignmentStatement):
                root = node.lhs
                while isinstance(root, (A.MemberExpression, A.SliceExpression, A.IndexExpression)):
                    root = root.expr
                d = getattr(root, "decl", None)
                if isinstance(d, A.Parameter) and d.direction in (A.Direction.IN, A.Direction.NONE) \
                        and isinstance(strip(d.type_ref.type), (T.HeaderType, T.StructType)):
                    raise EbpfUnsupported(node, f"function {decl.name} writes its in parameter {d.name}")
        saved, saved_in = self.scopes, self.in_function
        self.scopes, self.in_function = [{}, scope], True
        try:
            body = self.stmts(decl.body.statements)
        finally:
            self.scopes, self.in_function = saved, saved_in
        self.functions.append(f"/* function {decl.name} */\n"
                              f"static __always_inline {ret} {fn}({', '.join(params)}) {{\n"
                              + "".join(IND + x + "\n" for x in body)
                              + ("" if ret == "void" else f"{IND}return 0;\n") + "}")
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
        if decl.ctor_params or getattr(inst, "args", None) and not direct:
            raise EbpfUnsupported(inst, f"control {decl.name} with constructor arguments")
        # each instance gets its own function, pipe slots, tables and externs (keyed by
        # the declaration only while its body is generated)
        self._subcontrol_types.add(decl)
        low = self.lowered.at(prefix, inst.callee.expr if direct else inst)
        assert isinstance(low, LoweredBlock), (prefix, decl.name)
        fq = low.name
        key = inst if key is None else key
        # parameters live in the pipe (copy-in/copy-out at each apply, as P4 defines them),
        # so the instance's actions and tables reach them as the top blocks' ones
        scope: dict[Any, str] = {}
        slots: list[tuple[Any, str]] = []
        for p in decl.params:
            t = strip(p.type_ref.type)
            slot = self.fresh("sc_" + fq.replace(".", "_") + "_" + p.name)
            if isinstance(t, (T.HeaderType, T.StructType)):
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
            elif isinstance(t, (T.HeaderType, T.StructType)):
                before.append(f"{slot} = {self.lval(a.value)};")
            else:
                before.append(f"{slot} = {self.ex(a.value)};")
            if p.direction in (A.Direction.OUT, A.Direction.INOUT):
                after.append(f"{self.lval(a.value)} = {slot};")
        return before + [f"{inst[1]}(P);"] + after + ["if (P->exited) return;"]
