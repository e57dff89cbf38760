"""Program-level compilation: blocks, actions, tables and extern instances.

`compile_program` turns a `CheckedProgram` into a `CompiledProgram`: one Python
module source (every parser, control, action and function of the program as a
generated function), executed once into a private namespace that also holds the
run-time objects (tables, registers, counters, meters, digests, value sets).
Each control instance gets its own tables and externs, named as p4c names them
in P4Info (``Ingress.table``, ``@name`` honoured).
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any

from softswitch import tables as TB
from softswitch.action_profiles import ActionProfile
from softswitch.compiler.aliasing import aliased_bound_args
from softswitch.compiler.body import BodyCompiler, invalidate_outs
from softswitch.compiler.entries import (
    CONST_PRIORITY_BASE,
    action_decl_of,
    const_int,
    keyset_match,
    spec_priorities,
)
from softswitch.compiler.exprs import is_object_type, scalar_kind, width_of
from softswitch.compiler.layout import TypeLayouts, attr_name, strip
from softswitch.compiler.parsers import ParserCompiler
from softswitch.compiler.support import (
    PacketContext,
    _div,
    _fmt_msg,
    _hmod,
    _lookahead_hdr,
    _mod,
    _random,
    _shl,
)
from softswitch.compiler.walk import annotation_ints, control_plane_name, direct_instance_name, walk
from softswitch.errors import (
    CompileError,
    DropSignal,
    ExitSignal,
    ParserErrorSignal,
    StackOutOfBounds,
)
from softswitch.externs import hashes
from softswitch.externs.stateful import (
    Counter,
    CounterType,
    DigestQueue,
    DirectCounter,
    DirectMeter,
    Meter,
    Register,
    ValueSet,
)
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.frontend.text import expr_text
from softswitch.trace import TraceEvent


@dataclass(slots=True, kw_only=True)
class TableInfo:
    table: TB.Table
    global_name: str
    decl: A.TableDecl
    direct_meter: str | None = None
    profile: str | None = None   # global name of the ActionProfile of an indirect table
    action_fns: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True, kw_only=True)
class CompiledProgram:
    """The program ready to run: block functions plus run-time objects by P4Info name."""

    checked: Any
    env: dict[str, Any]
    source: str
    blocks: dict[str, Any]
    block_names: dict[str, str]
    header_cls: type
    meta_cls: type
    sm_cls: type
    meta_type: Any
    errors: list[str]
    field_lists: dict[int, list[str]]
    tables: dict[str, TB.Table]
    registers: dict[str, Register]
    counters: dict[str, Counter]
    meters: dict[str, Meter]
    direct_counters: dict[str, DirectCounter]
    direct_meters: dict[str, DirectMeter]
    digests: dict[str, DigestQueue]
    value_sets: dict[str, ValueSet]
    action_profiles: dict[str, ActionProfile]
    actions: dict[str, list[tuple[str, int]]]
    pk: PacketContext

    def error_code(self, name: str) -> int:
        return self.errors.index(name)

    def error_name(self, code: int) -> str:
        return self.errors[code] if 0 <= code < len(self.errors) else str(code)


class ProgramGen(ParserCompiler):
    """Holds everything shared while compiling one program."""

    def __init__(self, checked: Any) -> None:
        self.checked = checked
        self.layouts = TypeLayouts()
        self.env = self.layouts.env
        self.pk = PacketContext()
        self.env.update({
            "PK": self.pk, "TE": TraceEvent, "EXIT": ExitSignal("exit"), "ExitSignal": ExitSignal,
            "DropSignal": DropSignal,
            "_div": _div, "_mod": _mod, "_shl": _shl, "_hmod": _hmod, "_random": _random,
            "_fb": hashes.fields_to_bytes, "_lookahead_hdr": _lookahead_hdr, "_fmt_msg": _fmt_msg,
            "_perr": self._perr, "StackOutOfBounds": StackOutOfBounds,
        })
        self.errors = list(checked.errors) or ["NoError"]
        self.direct_instances: dict[int, str] = {}
        self.direct_names: dict[str, int] = {}
        self._ids = itertools.count()
        self.src: list[str] = []
        self.tables: dict[str, TableInfo] = {}
        self.tables_by_name: dict[str, TB.Table] = {}
        self.registers: dict[str, Register] = {}
        self.counters: dict[str, Counter] = {}
        self.meters: dict[str, Meter] = {}
        self.direct_counters: dict[str, DirectCounter] = {}
        self.direct_meters: dict[str, DirectMeter] = {}
        self.digests: dict[str, DigestQueue] = {}
        self.value_sets: dict[str, ValueSet] = {}
        self.action_profiles: dict[str, ActionProfile] = {}
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
        fq = control_plane_name(inst, prefix)
        td = inst.type_decl
        if isinstance(td, (A.ParserDecl, A.ControlDecl)):
            fn = self.compile_block(td, fq, inst.args, scope=scope)
        else:
            obj = self.make_extern(inst, fq)
            fn = self.fresh("X_" + fq)
            self.env[fn] = obj
        for s in (scope, action_scope):
            if s is not None:
                s[inst] = fn
        return fn

    def make_extern(self, inst: A.InstantiationDecl, fq: str) -> Any:
        tname = getattr(inst.type_decl, "name", None) or getattr(inst.type_ref, "name", "")
        args = [a.value for a in inst.args]

        def const(i: int) -> int:
            v = args[i].const_value
            if not isinstance(v, int):
                raise CompileError(f"{inst.loc}: {tname} {inst.name}: argument {i + 1} must be a constant")
            return int(v)

        def enum_arg(i: int) -> str:
            a = args[i]
            return a.member if isinstance(a, A.MemberExpression) else str(a.const_value)

        def elem_type() -> T.P4Type | None:
            tr = inst.type_ref
            if isinstance(tr, A.SpecializedTypeRef) and tr.args:
                return tr.args[0].type
            if inst.type_bindings:
                return next(iter(inst.type_bindings.values()))
            raise CompileError(f"{inst.loc}: {tname} {inst.name}: element type unknown")

        kinds = {"packets": CounterType.PACKETS, "bytes": CounterType.BYTES,
                 "packets_and_bytes": CounterType.PACKETS_AND_BYTES}
        if tname == "register":
            et = strip(elem_type())
            kind, _ = scalar_kind(et)
            reg = Register(name=fq, size=const(0), width=width_of(et), signed=kind == "s")
            self.registers[fq] = reg
            return reg
        if tname == "counter":
            ctr = Counter(name=fq, size=const(0), counter_type=kinds[enum_arg(1)])
            self.counters[fq] = ctr
            return ctr
        if tname == "direct_counter":
            dctr = DirectCounter(name=fq, counter_type=kinds[enum_arg(0)])
            self.direct_counters[fq] = dctr
            return dctr
        if tname == "meter":
            mtr = Meter(name=fq, size=const(0), meter_type=kinds[enum_arg(1)])
            self.meters[fq] = mtr
            return mtr
        if tname in ("action_profile", "action_selector"):
            return self._make_profile(tname, fq, args, inst.loc)
        if tname == "direct_meter":
            dmtr = DirectMeter(name=fq, meter_type=kinds[enum_arg(0)])
            self.direct_meters[fq] = dmtr
            return dmtr
        raise CompileError(f"{inst.loc}: unsupported: extern {tname} ({inst.name})")

    def _make_profile(self, tname: str, fq: str, args: list[Any], loc: Any) -> ActionProfile:
        """`action_profile(size)` / `action_selector(algorithm, size, output_width)`."""
        def const(a: Any) -> int:
            v = getattr(a, "const_value", None)
            if not isinstance(v, int):
                raise CompileError(f"{loc}: {tname} {fq}: arguments must be constants")
            return int(v)
        if tname == "action_profile":
            prof = ActionProfile(name=fq, size=const(args[0]))
        else:
            algo = args[0].member if isinstance(args[0], A.MemberExpression) else None
            if algo not in hashes.HASH_ALGORITHMS:
                raise CompileError(f"{loc}: action_selector {fq}: unsupported hash algorithm {algo}")
            prof = ActionProfile(name=fq, size=const(args[1]), algorithm=algo,
                                 output_width=const(args[2]))
        self.action_profiles[fq] = prof
        return prof

    def hash_fn(self, algo: str, node: Any) -> str:
        if algo not in hashes.HASH_ALGORITHMS:
            raise CompileError(f"{node.loc}: unsupported hash algorithm {algo}")
        name = "_hash_" + algo
        self.env[name] = hashes.HASH_ALGORITHMS[algo]
        return name

    def fields_bytes_fn(self) -> str:
        """Name of the packer for field lists whose widths are known only at run time."""
        self.env["_fields_to_bytes"] = hashes.fields_to_bytes
        return "_fields_to_bytes"

    def digest_queue(self, data: A.Expression) -> str:
        t = strip(data.type)
        name = getattr(t, "name", None) or "digest"
        fields = [f for f, _ in t.fields] if isinstance(t, T.StructLikeType) else []
        q = self.digests.get(name)
        if q is None:
            q = DigestQueue(name=name, field_names=fields)
            self.digests[name] = q
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
        rt = control_plane_name(decl, prefix)
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
            # direct invocation ``MyControl.apply(...)``: one anonymous instance per call site
            fn = self.direct_instances.get(id(inst))
            if fn is None:
                fn = self.compile_block(decl, direct_instance_name(body.block, decl.name,
                                                                   self.direct_names))
                self.direct_instances[id(inst)] = fn
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

    def make_table(self, decl: A.TableDecl, instance: str, scope: dict[Any, str],
                   action_scopes: list[dict[Any, str]] | None = None) -> str:
        name = control_plane_name(decl, instance)
        keys = []
        for k in decl.keys:
            if k.match_kind == "selector":
                continue  # hashed to pick a group member, not looked up
            kname = None
            for ann in k.annotations:
                if ann.name == "name" and ann.args:
                    kname = getattr(ann.args[0], "value", None)
            keys.append(TB.KeyField(name=kname or expr_text(k.expr), match_kind=k.match_kind,
                                    width=width_of(k.expr.type)))
        specs = []
        fns: dict[str, str] = {}
        for ref in decl.actions:
            adecl = action_decl_of(ref)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            rt = self.action_runtime[afn]
            if any(p.direction is not A.Direction.NONE for p in adecl.params):
                afn = self._bind_directional(ref, adecl, afn, action_scopes or [self.globals_])
            fns[rt] = afn
            annots = {a.name for a in ref.annotations} | {a.name for a in adecl.annotations}
            specs.append(TB.ActionSpec(name=rt, params=self.action_params[afn],
                                       default_only="defaultonly" in annots,
                                       table_only="tableonly" in annots))
        default_name: str | None = None
        default_args: tuple[int, ...] = ()
        if decl.default_action is not None:
            ref = decl.default_action
            adecl = action_decl_of(ref)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            default_name = self.action_runtime[afn]
            data = [p for p in adecl.params if p.direction is A.Direction.NONE]
            vals = [a.value.const_value for a in ref.args][-len(data):] if data else []
            default_args = tuple(const_int(v, ref) & ((1 << width_of(p.type_ref.type)) - 1)
                                 for v, p in zip(vals, data))
            if default_name not in fns:
                fns[default_name] = afn
                specs.append(TB.ActionSpec(name=default_name, params=self.action_params[afn]))
        else:
            noaction = self.checked.top_level.get("NoAction")
            if noaction is not None:
                afn = self.action_fn(noaction, None)
                default_name = self.action_runtime[afn]
                if default_name not in fns:
                    fns[default_name] = afn
                    specs.append(TB.ActionSpec(name=default_name, params=[]))
        size = decl.size_value or 1024
        counters = decl.property("counters")
        meters = decl.property("meters")
        impl = decl.property("implementation")
        profile = self._table_profile(decl, name, impl, scope) if impl is not None else None
        table = TB.Table(name=name, keys=keys, actions=specs, size=size,
                         default_action=default_name or "NoAction", default_args=default_args,
                         default_const=decl.default_action_const, has_direct_counter=counters is not None,
                         has_direct_meter=meters is not None, entries_const=decl.entries_const)
        g = self.fresh("T_" + name)
        self.env[g] = table
        info = TableInfo(table=table, global_name=g, decl=decl, action_fns=fns)
        if profile is not None:
            prof_obj, info.profile = profile
            table.profile = prof_obj
            for spec in specs:
                prof_obj.actions.setdefault(spec.name, spec)
            prof_obj.selector_widths = tuple(width_of(k.expr.type) for k in decl.keys
                                             if k.match_kind == "selector")
        for prop, store in ((counters, self.direct_counters), (meters, self.direct_meters)):
            if prop is not None:
                d = getattr(prop.value, "decl", None)
                obj_name = scope.get(d) if d is not None else None
                if obj_name is None and isinstance(d, A.InstantiationDecl):
                    obj_name = self.global_name(d)  # an instance declared at the top level
                obj = self.env.get(obj_name) if obj_name else None
                if obj is None:
                    raise CompileError(f"{decl.loc}: table {name}: {prop.name} must name a direct extern instance")
                obj.table = table
                if prop is meters:
                    info.direct_meter = obj_name
        self.tables[g] = info
        self.tables_by_name[name] = table
        if decl.entries:
            self._const_entries(decl, table, fns, scope)
        return g

    def _table_profile(self, decl: A.TableDecl, name: str, impl: Any,
                       scope: dict[Any, str]) -> tuple[ActionProfile, str]:
        """The action profile of an indirect table: a named instance or an inline constructor."""
        v = impl.value
        d = getattr(v, "decl", None)
        if d is not None and d in scope:
            g = scope[d]
            prof = self.env.get(g)
        elif isinstance(d, A.InstantiationDecl):
            g = self.global_name(d) or ""  # a profile declared at the top level
            prof = self.env.get(g)
        elif isinstance(v, A.MethodCallExpression):
            tname = expr_text(v.callee).split("(")[0].split("<")[0]
            prof = self._make_profile(tname, f"{name}_implementation", [a.value for a in v.args], decl.loc)
            g = self.fresh("X_" + prof.name)
            self.env[g] = prof
        else:
            prof = None
        if not isinstance(prof, ActionProfile):
            raise CompileError(f"{decl.loc}: unsupported: implementation of table {name} "
                               f"({expr_text(v)}) is not an action_profile or action_selector")
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
        copies: list[tuple[A.Expression, str]] = []  # aliased objects (softswitch.compiler.aliasing)
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

    def _const_entries(self, decl: A.TableDecl, table: TB.Table, fns: dict[str, str],
                       scope: dict[Any, str]) -> None:
        running = 0
        spec_prios = spec_priorities(decl) if table.needs_priority else None
        for i, ent in enumerate(decl.entries or []):
            key: list[Any] = []
            keysets = ent.keysets
            if len(keysets) == 1 and len(table.keys) > 1 and isinstance(keysets[0], A.DefaultKeyset):
                keysets = keysets * len(table.keys)
            for kf, ks in zip(table.keys, keysets):
                key.append(keyset_match(kf, ks, self.error_codes_of))
            adecl = action_decl_of(ent.action)
            afn = scope.get(adecl) or self.action_fn(adecl, None)
            rt = self.action_runtime[afn]
            data = [p for p in adecl.params if p.direction is A.Direction.NONE]
            vals = [a.value.const_value for a in ent.action.args][-len(data):] if data else []
            args = [const_int(v, ent) & ((1 << width_of(p.type_ref.type)) - 1) for v, p in zip(vals, data)]
            prio = 0
            if spec_prios is not None:
                prio = spec_prios[i]
            elif table.needs_priority:
                # const entries follow p4c/BMv2: the *smallest* @priority wins and an entry
                # without one takes the previous entry's priority + 1 (list order); the
                # table's scale is P4Runtime's (largest wins), hence the subtraction
                p4_prio = ent.priority_value if ent.priority_value is not None else running + 1
                running = p4_prio
                prio = CONST_PRIORITY_BASE - p4_prio
            table.insert(key, rt, args, prio, is_const=True)

V1_BLOCKS = ("p", "vr", "ig", "eg", "ck", "dep")


def compile_program(checked: Any) -> CompiledProgram:
    """Compile a checked v1model program once into generated Python code."""
    if checked.main is None:
        raise CompileError("program declares no main package")
    if checked.main.package != "V1Switch":
        raise CompileError(f"unsupported: package {checked.main.package} (only V1Switch)")
    gen = ProgramGen(checked)
    blocks: dict[str, str] = {}
    names: dict[str, str] = {}
    for blk in checked.main.blocks:
        blocks[blk.param] = gen.compile_block(blk.decl, blk.decl.name, blk.args, top=True)
        names[blk.param] = blk.decl.name
    missing = [b for b in V1_BLOCKS if b not in blocks]
    if missing:
        raise CompileError(f"V1Switch main misses blocks {missing}")
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
    parser = checked.main.block("p").decl
    hdr_t = parser.params[1].type_ref.type
    meta_t = parser.params[2].type_ref.type
    sm_t = parser.params[3].type_ref.type
    meta_decl = checked.top_level.get(getattr(strip(meta_t), "name", ""))
    field_lists: dict[int, list[str]] = {}
    for f in getattr(meta_decl, "fields", []) or []:
        for idx in annotation_ints(f, "field_list"):
            field_lists.setdefault(idx, []).append(attr_name(f.name))
    actions = {rt: gen.action_params[fn] for fn, rt in gen.action_runtime.items()}
    return CompiledProgram(
        checked=checked, env=gen.env, source=source,
        blocks={k: gen.env[v] for k, v in blocks.items()}, block_names=names,
        header_cls=gen.layouts.class_for(hdr_t), meta_cls=gen.layouts.class_for(meta_t),
        sm_cls=gen.layouts.class_for(sm_t), meta_type=meta_t, errors=gen.errors,
        field_lists=field_lists, tables=gen.tables_by_name, registers=gen.registers,
        counters=gen.counters, meters=gen.meters, direct_counters=gen.direct_counters,
        direct_meters=gen.direct_meters, digests=gen.digests, value_sets=gen.value_sets, action_profiles=gen.action_profiles,
        actions=actions, pk=gen.pk)
