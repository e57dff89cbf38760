"""Program-level compilation: blocks, actions, tables and extern instances.

`compile_program` turns a `CheckedProgram` into a `CompiledProgram`: one Python
module source (every parser, control, action and function of the program as a
generated function), executed once into a private namespace bound to the run-time
objects (tables, registers, counters, meters, digests, value sets). Those objects
are not made here: `softswitch.objects.build_objects` makes them from the lowered
program, for this back end and the eBPF target alike; this back end binds its
generated action functions into their tables.
"""
from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from softswitch.architecture import Architecture, PacketContext
from softswitch.backends.python.arch_lowering import rebind_hash
from softswitch.backends.python.body import BodyCompiler, invalidate_outs
from softswitch.backends.python.exprs import is_object_type, width_of
from softswitch.backends.python.layout import TypeLayouts, strip
from softswitch.backends.python.parsers import ParserCompiler
from softswitch.backends.python.support import _div, _lookahead_hdr, _mod, _shl
from softswitch.backends.python.tables_gen import TableCompiler, TableInfo
from softswitch.errors import (
    CompileError,
    DropSignal,
    ExitSignal,
    ParserErrorSignal,
    StackOutOfBounds,
)
from softswitch.externs import hashes
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.frontend.walk import walk
from softswitch.lowering import LoweredBlock, LoweredExtern, LoweredProgram, lower_program
from softswitch.objects import RuntimeObjects, build_objects
from softswitch.trace import TraceEvent


@dataclass(slots=True, kw_only=True)
class CompiledProgram(RuntimeObjects):
    """The program ready to run: its run-time objects by P4Info name (`RuntimeObjects`,
    the ones every target shares) plus the block functions bound to them.

    Nothing here is an architecture's: its pipeline (e.g. `V1Switch`) reads the
    blocks by the package's parameter names and the value classes from `layouts`."""

    env: dict[str, Any]
    source: str
    layouts: TypeLayouts          # the classes of the program's types (`class_for`)
    blocks: dict[str, Any]        # the architecture's block parameter -> generated function
    block_names: dict[str, str]
    pk: PacketContext

    def bind_hash(self, algorithm: str, fn: Callable[[bytes], int]) -> None:
        """The generated code computes `algorithm` with `fn` from its next call on."""
        rebind_hash(self.arch, self.env, algorithm, fn)


class ProgramGen(ParserCompiler, TableCompiler):
    """Holds everything shared while compiling one program."""

    def __init__(self, checked: Any, arch: Architecture, lowered: LoweredProgram,
                 objects: RuntimeObjects) -> None:
        self.checked = checked
        self.arch = arch
        self.lowered = lowered
        self.objects = objects
        self.layouts = TypeLayouts()
        self.env = self.layouts.env
        self.pk = arch.new_context()
        self.env.update({
            "PK": self.pk, "TE": TraceEvent, "EXIT": ExitSignal("exit"), "ExitSignal": ExitSignal,
            "DropSignal": DropSignal,
            "_div": _div, "_mod": _mod, "_shl": _shl, "_lookahead_hdr": _lookahead_hdr,
            "_perr": self._perr, "StackOutOfBounds": StackOutOfBounds,
        })
        self.errors = list(lowered.errors)
        self.direct_instances: dict[tuple[str, int], str] = {}
        self._ids = itertools.count()
        self.src: list[str] = []
        self.tables: dict[str, TableInfo] = {}
        self.action_runtime: dict[str, str] = {}        # fn global name -> control-plane name
        self.action_params: dict[str, list[tuple[str, int]]] = {}
        self._action_decl_of: dict[str, Any] = {}               # fn global name -> ActionDecl
        self.top_actions: dict[Any, str] = {}
        self.functions: dict[Any, str] = {}
        self.globals_: dict[Any, str] = {}

    def _perr(self, code: int) -> ParserErrorSignal:
        name = self.errors[code] if 0 <= code < len(self.errors) else str(code)
        return ParserErrorSignal(name, code)

    # ------------------------------------------------------------------- names
    def fresh(self, base: str) -> str:
        base = re.sub(r"\W", "_", base)
        return f"{base}_{next(self._ids)}"

    def error_codes_of(self, e: Any) -> int | None:
        """The code of an `error.X` expression, None for anything else."""
        if isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.ERROR_MEMBER:
            return self.error_code(e.member, e)
        return None

    def error_code(self, name: str, node: Any = None) -> int:
        if name not in self.errors:
            raise CompileError(f"{getattr(node, 'loc', '')}: unknown error member {name}")
        return self.errors.index(name)

    def global_name(self, decl: Any) -> str | None:
        n = self.globals_.get(decl)
        if n is not None:
            return n
        if isinstance(decl, A.InstantiationDecl):
            return self.instantiate(decl, "", scope=self.globals_)
        if isinstance(decl, A.ActionDecl):
            return self.action_fn(decl, None)
        return None

    # ----------------------------------------------------------------- externs
    def instantiate(self, inst: A.InstantiationDecl, prefix: str,
                    scope: dict[Any, str] | None = None,
                    action_scope: dict[Any, str] | None = None) -> str:
        """Create the run-time object of an extern instance (or compile a sub-block)."""
        low = self.lowered.at(prefix, inst)
        if isinstance(low, LoweredBlock):
            fn = self.compile_block(low.decl, low.name, inst.args, scope=scope)
        else:
            assert isinstance(low, LoweredExtern), (prefix, inst.name)
            obj = self.extern_object(low)
            fn = self.fresh("X_" + low.name)
            self.env[fn] = obj
        for s in (scope, action_scope):
            if s is not None:
                s[inst] = fn
        return fn

    def extern_object(self, ext: LoweredExtern) -> Any:
        """The run-time object of an extern instance (`softswitch.objects` made it)."""
        obj = self.objects.instance(ext.name)
        if obj is None:
            raise CompileError(f"{ext.loc}: internal error: extern instance {ext.name} has no "
                               f"run-time object")
        return obj

    def fields_bytes_fn(self) -> str:
        """Name of the packer for field lists whose widths are known only at run time."""
        self.env["_fields_to_bytes"] = hashes.fields_to_bytes
        return "_fields_to_bytes"

    def digest_queue(self, data: A.Expression) -> str:
        t = strip(data.type)
        name = getattr(t, "name", None) or "digest"
        q = self.objects.digests.get(name)
        if q is None:
            raise CompileError(f"{data.loc}: internal error: digest {name} has no queue")
        g = "DG_" + re.sub(r"\W", "_", name)
        self.env[g] = q
        return g

    # ----------------------------------------------------------------- actions
    def action_fn(self, decl: A.ActionDecl, body: BodyCompiler | None) -> str:
        if body is not None:
            for scope in body.scopes:
                n = scope.get(decl)
                if n is not None:
                    return n
        n = self.top_actions.get(decl)
        if n is None:
            n = self.compile_action(decl, "", [{}])
            self.top_actions[decl] = n
        return n

    def action_name_of(self, label: A.Expression) -> str:
        decl = getattr(label, "decl", None)
        for fn, rt in self.action_runtime.items():
            if self._action_decl_of.get(fn) is decl:
                return rt
        raise CompileError(f"{label.loc}: switch label {expr_text(label)} is not an action of the table")

    def compile_action(self, decl: A.ActionDecl, prefix: str, outer: list[dict[Any, str]]) -> str:
        rt = self.lowered.action(prefix, decl).name
        fn = self.fresh("A_" + rt)
        local: dict[Any, str] = {}
        pnames = []
        outs = []
        data_params = []
        for p in decl.params:
            pn = self.fresh("a_" + p.name)
            local[p] = pn
            pnames.append(pn)
            pt = p.type_ref.type
            if p.direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(pt):
                outs.append(pn)
            if p.direction is A.Direction.NONE:
                data_params.append((p.name, width_of(pt)))
        b = BodyCompiler(self, block=rt, scopes=[local] + outer, outs=outs)
        b.emit("tr = PK.trace")
        invalidate_outs(b, decl.params, pnames)
        b.emit(f"if tr is not None: tr.append(TE('action', {rt!r}, {{'action': {rt!r}, "
               f"'args': ({''.join(p + ', ' for p in pnames)})}}))")
        b.block_(decl.body.statements)
        if outs:
            b.emit(b.return_line())
        self.src.append(f"def {fn}(L, {', '.join(pnames)}):\n" + "\n".join(b.exit_copy_out_lines()) + "\n")
        self.action_runtime[fn] = rt
        self.action_params[fn] = data_params
        self._action_decl_of[fn] = decl
        return fn

    def function_fn(self, decl: A.FunctionDecl) -> str:
        n = self.functions.get(decl)
        if n is not None:
            return n
        fn = self.fresh("FN_" + decl.name)
        self.functions[decl] = fn
        local: dict[Any, str] = {}
        pnames, outs = [], []
        for p in decl.params:
            pn = self.fresh("a_" + p.name)
            local[p] = pn
            pnames.append(pn)
            if p.direction in (A.Direction.OUT, A.Direction.INOUT) and not is_object_type(p.type_ref.type):
                outs.append(pn)
        rt = strip(decl.return_type.type) if decl.return_type.type is not None else T.VOID
        returns_value = not isinstance(rt, T.VoidType)
        b = BodyCompiler(self, block=decl.name, scopes=[local, self.globals_], outs=outs,
                         returns_value=returns_value)
        b.emit("tr = PK.trace")
        invalidate_outs(b, decl.params, pnames)
        b.block_(decl.body.statements)
        b.emit(b.return_line("None"))
        self.src.append(f"def {fn}({', '.join(pnames)}):\n" + "\n".join(b.exit_copy_out_lines()) + "\n")
        return fn

    def sub_block_fn(self, inst: A.Expression, body: BodyCompiler) -> str:
        decl = getattr(inst, "decl", None)
        if isinstance(decl, (A.ParserDecl, A.ControlDecl)):
            # direct invocation ``MyControl.apply(...)``: one anonymous instance per call
            # site of each instance (named by the lowering)
            key = (body.block, id(inst))
            fn = self.direct_instances.get(key)
            if fn is None:
                low = self.lowered.at(body.block, inst)
                assert isinstance(low, LoweredBlock), (body.block, decl.name)
                fn = self.compile_block(decl, low.name)
                self.direct_instances[key] = fn
            return fn
        return body.name_of(decl, inst)

    def table_info(self, decl: A.TableDecl, body: BodyCompiler) -> TableInfo:
        return self.tables[body.name_of(decl, decl)]

    # ------------------------------------------------------------------ blocks
    def compile_block(self, decl: Any, instance: str, ctor_args: list[Any] | None = None,
                      *, top: bool = False, scope: dict[Any, str] | None = None) -> str:
        """Compile a parser/control instance. `top`: a block of the main package, whose
        arguments are fresh objects, so `out` parameters need no invalidation; `scope`:
        where instances given as constructor arguments are found."""
        consts = self._ctor_bindings(decl, instance, ctor_args or [], scope or {})
        if isinstance(decl, A.ParserDecl):
            return self.compile_parser(decl, instance, consts, top=top)
        return self.compile_control(decl, instance, consts, top=top)

    def _ctor_bindings(self, decl: Any, instance: str, args: list[Any],
                       scope: dict[Any, str]) -> dict[Any, str]:
        """Constructor parameters of a parser/control bound to the constant arguments, or
        to the instances given (a control passed to a control: ``C2(c1) c2;`` or
        ``C2(C1()) c2;``)."""
        out: dict[Any, str] = {}
        params = list(getattr(decl, "ctor_params", []) or [])
        for i, p in enumerate(params):
            arg = args[i].value if i < len(args) else p.default
            if isinstance(arg, A.PathExpression) and arg.decl in scope:
                out[p] = scope[arg.decl]
                continue
            if isinstance(arg, A.MethodCallExpression) and arg.call_kind is A.CallKind.CONSTRUCTOR \
                    and isinstance(arg.callee_decl, (A.ParserDecl, A.ControlDecl)):
                out[p] = self.compile_block(arg.callee_decl, f"{instance}.{p.name}", arg.args, scope=scope)
                continue
            v = getattr(arg, "const_value", None)
            if v is None:
                raise CompileError(f"{decl.loc}: unsupported: constructor parameter {p.name} of "
                                   f"{instance} without a constant argument")
            out[p] = repr(v)
        return out

    def _params(self, decl: Any) -> tuple[list[str], list[Any]]:
        return [self.fresh("p_" + p.name) for p in decl.params], list(decl.params)

    def compile_control(self, decl: A.ControlDecl, instance: str,
                        consts: dict[Any, str] | None = None, *, top: bool = False) -> str:
        fn = self.fresh("C_" + instance)
        apply_scope: dict[Any, str] = dict(consts or {})
        action_scope: dict[Any, str] = dict(consts or {})
        frame_slots: list[str] = []
        pnames, params = self._params(decl)
        init: list[str] = []
        outs: list[str] = []
        # Actions reach the control's variables through a frame object L; a control
        # without actions or tables (deparsers, checksum controls) needs none.
        needs_frame = any(isinstance(loc, (A.ActionDecl, A.TableDecl)) for loc in decl.locals) or any(
            isinstance(n, A.MethodCallExpression) and n.call_kind is A.CallKind.ACTION
            for n in walk(decl.body))
        fr = "L." if needs_frame else ""
        for pn, p in zip(pnames, params):
            frame_slots.append(pn)
            if needs_frame:
                init.append(f"L.{pn} = {pn}")
            pt = p.type_ref.type
            if is_object_type(pt) or isinstance(strip(pt), T.ExternType):
                apply_scope[p] = pn
            else:
                apply_scope[p] = f"{fr}{pn}"
                if p.direction in (A.Direction.OUT, A.Direction.INOUT):
                    outs.append(f"{fr}{pn}")
            action_scope[p] = f"L.{pn}"
        # locals: variables into the frame, instances, then actions, then tables
        for loc in decl.locals:
            if isinstance(loc, A.VariableDecl):
                vn = self.fresh("v_" + loc.name)
                frame_slots.append(vn)
                t = loc.type_ref.type
                init.append(f"{fr}{vn} = {self.layouts.new_value_src(t)}")
                if is_object_type(t):
                    apply_scope[loc] = vn
                    if needs_frame:
                        init.append(f"{vn} = L.{vn}")
                else:
                    apply_scope[loc] = f"{fr}{vn}"
                action_scope[loc] = f"L.{vn}"
            elif isinstance(loc, A.InstantiationDecl):
                self.instantiate(loc, instance, apply_scope, action_scope)
        init_assign: list[tuple[A.VariableDecl, str]] = [
            (loc, apply_scope[loc]) for loc in decl.locals
            if isinstance(loc, A.VariableDecl) and loc.init is not None]
        outer_action = [action_scope, self.globals_]
        for loc in decl.locals:
            if isinstance(loc, A.ActionDecl):
                afn = self.compile_action(loc, instance, outer_action)
                apply_scope[loc] = afn
                action_scope[loc] = afn
        for loc in decl.locals:
            if isinstance(loc, A.TableDecl):
                g = self.make_table(loc, instance, apply_scope, outer_action)
                apply_scope[loc] = g
        b = BodyCompiler(self, block=instance, scopes=[{}, apply_scope, self.globals_], outs=outs)
        b.emit("tr = PK.trace")
        if not top:
            invalidate_outs(b, params, pnames)
        if needs_frame:
            frame = self.fresh("F_" + instance)
            self.src.append(f"class {frame}:\n    __slots__ = {tuple(frame_slots)!r}\n")
            b.emit(f"L = {frame}()")
        for line in init:
            b.emit(line)
        for loc, target in init_assign:
            assert loc.init is not None
            if is_object_type(loc.type_ref.type):
                b.assign_obj(target, loc.init)
            else:
                b.emit(f"{target} = {b.ex(loc.init)}")
        b.block_(decl.body.statements)
        if outs:
            b.emit(b.return_line())
        self.src.append(f"def {fn}({', '.join(pnames)}):\n" + "\n".join(b.exit_copy_out_lines()) + "\n")
        return fn



def compile_program(checked: Any, arch: Architecture, lowered: LoweredProgram | None = None,
                    objects: RuntimeObjects | None = None) -> CompiledProgram:
    """Compile a checked program once into generated Python code; `arch` (e.g.
    `softswitch.v1model.V1MODEL`) checks its package and lowers its externs; `lowered`
    is the program's lowered form and `objects` its run-time objects (each made here
    when not given)."""
    if lowered is None:
        lowered = lower_program(checked, arch)
    if objects is None:
        objects = build_objects(lowered)
    gen = ProgramGen(checked, arch, lowered, objects)
    blocks: dict[str, str] = {}
    names: dict[str, str] = {}
    for blk in checked.main.blocks:
        low = lowered.blocks[blk.param]
        blocks[blk.param] = gen.compile_block(blk.decl, low.name, blk.args, top=True)
        names[blk.param] = low.name
    source = "\n".join(gen.src)
    try:
        code = compile(source, "<compiled p4 program>", "exec")
    except SyntaxError as exc:  # a back-end bug: show where
        lines = source.splitlines()
        ctx = "\n".join(lines[max(0, (exc.lineno or 1) - 4):(exc.lineno or 1) + 2])
        raise CompileError(f"internal error: generated code does not compile: {exc}\n{ctx}") from exc
    exec(code, gen.env)  # noqa: S102 - generated code is the design
    # bind compiled action functions into the tables
    for info in gen.tables.values():
        for rt, fn in info.action_fns.items():
            info.table.actions[rt].fn = gen.env[fn]
        info.table.bind()
    shared = {f.name: getattr(objects, f.name) for f in dataclasses.fields(RuntimeObjects)}
    return CompiledProgram(**shared, env=gen.env, source=source, layouts=gen.layouts,
                           blocks={k: gen.env[v] for k, v in blocks.items()}, block_names=names, pk=gen.pk)
