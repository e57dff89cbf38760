"""The parser (a chain of labels over ``pk_load``) and the deparser.

Both reach the packet only through the hook's primitives (`hooks`: ``pk_load``,
``pk_store``, ``pk_len``, ``resize_headers``), so the same C runs on tc and XDP.

Parser: each state is a label; ``extract`` loads the header's bytes into the scratch
buffer at the running offset ``P->off`` and unpacks its fields; a packet too short
sets ``parser_error`` and ends parsing (v1model: ingress still runs); ``select`` is an
if-chain over values, masks and ranges. Loops (over header stacks, TLVs) are bounded
by a count of states passed (ParserTimeout beyond it), which the verifier can follow.
A sub-parser is inlined where it is applied: its states become labels of the same
function (each apply its own), its ``accept`` jumps back to the caller's state and its
``reject`` or errors end parsing, as on the Python target (see `_apply` for how
arguments are passed).

Deparser: a straight sequence of ``emit``; the emitted headers' total length replaces
the parsed bytes, then each valid header's bytes are packed and stored. When the length
differs, ``resize_headers`` makes or removes the room: on tc ``bpf_skb_adjust_room``
(fast, but only for IP packets that keep their IP header), else the packet grows at
its head (``bpf_skb_change_head``) or its payload moves forward in 64-byte chunks and
the tail is cut (``bpf_skb_change_tail``); on XDP the frame's start moves
(``bpf_xdp_adjust_head``).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from softswitch.backends.ebpf import v1model as V1
from softswitch.backends.ebpf.blocks import IND, CGen
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import (
    HeaderLayout,
    cname,
    ctype,
    read_bits,
    scalar_width,
    stack_slots,
    strip,
    wide,
    write_bytes,
)
from softswitch.backends.ebpf.value_sets_c import gen_value_set, value_set_of
from softswitch.frontend import ast as A
from softswitch.frontend import types as T
from softswitch.lowering import LoweredMatch, LoweredState
from softswitch.lowering.model import value_width as width_of
from softswitch.lowering.names import control_plane_name


def _is_method(s: Any, name: str) -> A.MethodCallExpression | None:
    if isinstance(s, A.MethodCallStatement) and s.call.call_kind is A.CallKind.EXTERN_METHOD \
            and getattr(s.call.callee, "member", None) == name:
        return s.call
    return None


def _is_verify(s: Any) -> bool:
    """core.p4's ``verify(condition, error)``: on false, parsing ends with that error."""
    return (isinstance(s, A.MethodCallStatement) and s.call.call_kind is A.CallKind.EXTERN_FUNCTION
            and getattr(s.call.callee_decl, "name", None) == "verify")


MAX_PARSER_STATES = 256   # states one packet may pass through (loops over stacks, TLVs)


def gen_parser(g: CGen, decl: A.ParserDecl, errors: list[str]) -> str:
    roles = V1.block_roles("p")
    scope: dict[Any, str] = {p: f"P->{r}" for p, r in zip(decl.params, roles) if r != "packet"}
    g.scopes = [scope]
    short = errors.index(V1.PACKET_TOO_SHORT) if V1.PACKET_TOO_SHORT in errors else 1
    g.stack_error = errors.index("StackOutOfBounds") if "StackOutOfBounds" in errors else 3
    timeout = errors.index("ParserTimeout") if "ParserTimeout" in errors else 5
    top = _Machine(decl=decl, name=decl.name, label="st_", accept="st_accept", subs={},
                   codes=(short, timeout))
    lines = _locals(g, top, scope) + ["u32 steps = 0;", "goto st_start;"] + _states(g, top)
    lines += ["st_accept:", "st_reject:", "    return;"]
    return ("/* parser " + decl.name + " */\n"
            "static __always_inline void run_parser(P4_CTX *ctx, struct pipe *P) {\n"
            + "".join(IND + x + "\n" if not x.endswith(":") else x + "\n" for x in lines) + "}")


@dataclass(slots=True)
class _Instance:
    """A sub-parser instance (``Sub() s;``, or one passed as a constructor argument):
    its declaration, control-plane name, constant constructor arguments (parameter ->
    C value) and the parser instances its constructor parameters are bound to."""

    decl: A.ParserDecl
    name: str
    consts: dict[Any, str]
    subs: dict[Any, _Instance]


@dataclass(slots=True)
class _Machine:
    """The states of one parser as labels of ``run_parser``: the package's parser, or a
    sub-parser inlined where it is applied (each apply its own labels, so the one
    ``steps`` count bounds the whole walk and ``return`` ends parsing from any depth)."""

    decl: A.ParserDecl
    name: str                      # the instance's control-plane name
    label: str                     # C label prefix of its states
    accept: str                    # where its ``accept`` goes
    subs: dict[Any, _Instance]     # parser instances it may apply
    codes: tuple[int, int]         # error codes: PacketTooShort, ParserTimeout

    def target(self, state: str) -> str:
        """The label a transition to `state` jumps to (``reject`` ends parsing at any depth)."""
        if state == "accept":
            return self.accept
        if state == "reject":
            return "st_reject"
        return self.label + cname(state)


def _locals(g: CGen, m: _Machine, scope: dict[Any, str]) -> list[str]:
    """A parser's locals: variables (initialised at each apply, as the Python target
    does), value sets (one per instance) and sub-parser instances."""
    init: list[str] = []
    for d in m.decl.locals:
        if isinstance(d, A.VariableDecl):
            init += g.local_var(d, scope)
        elif isinstance(d, A.ConstDecl):
            continue                         # folded into the expressions that use it
        elif isinstance(d, A.ValueSetDecl):
            low = g.lowered.at(m.name, d)
            name = getattr(low, "name", None) or control_plane_name(d, m.name)
            if name in g.value_set_maps:     # this instance applied again: its maps exist
                g.value_set_fns[d] = g.value_set_maps[name] + "_match"
            else:
                gen_value_set(g, d, name, width_of(d.elem_type.type))
        elif isinstance(d, A.InstantiationDecl) and isinstance(d.type_decl, A.ParserDecl):
            low = g.lowered.at(m.name, d)
            m.subs[d] = _instance(g, d.type_decl, getattr(low, "name", None)
                                  or control_plane_name(d, m.name), list(d.args or []), m.subs, d)
        else:
            raise EbpfUnsupported(d, f"parser local {type(d).__name__} {d.name}")
    return init


def _instance(g: CGen, decl: A.ParserDecl, name: str, args: list[A.Argument],
              outer: dict[Any, _Instance], node: Any) -> _Instance:
    """Bind a parser instance's constructor parameters: constants, instances declared
    beside it (``P2(p1) p2;``) or made in place (``P2(P1()) p2;``), as the lowering names them."""
    inst = _Instance(decl=decl, name=name, consts={}, subs={})
    for i, p in enumerate(decl.ctor_params):
        v = args[i].value if i < len(args) else p.default
        target = getattr(v, "decl", None)
        if target is not None and target in outer:
            inst.subs[p] = outer[target]
        elif isinstance(v, A.MethodCallExpression) and v.call_kind is A.CallKind.CONSTRUCTOR \
                and isinstance(v.callee_decl, A.ParserDecl):
            inst.subs[p] = _instance(g, v.callee_decl, f"{name}.{p.name}", list(v.args or []), outer, v)
        elif v is not None and isinstance(v.const_value, (bool, int)):
            inst.consts[p] = g.ex(v)
        else:
            raise EbpfUnsupported(node, f"parser {decl.name}: constructor argument {p.name} "
                                        "(a constant or a parser instance)")
    return inst


def _states(g: CGen, m: _Machine) -> list[str]:
    short, timeout = m.codes
    lines: list[str] = []
    for st, low in zip(m.decl.states, g.lowered.states(m.decl)):
        lines.append(f"{m.target(st.name)}:")
        body: list[str] = [f"if (++steps > {MAX_PARSER_STATES}) {{",
                           f"    P->sm.parser_error = {timeout};", "    return;", "}"]
        for s in st.statements:
            call = _is_method(s, "extract")
            body += _lookaheads(g, s, short)
            if call is not None:
                body += _extract(g, call, short)
            elif _is_method(s, "advance"):
                body += _advance(g, s.call, short)  # type: ignore[union-attr]
            elif _is_method(s, "lookahead"):
                continue                     # a discarded lookahead only checks the length
            elif _is_verify(s):
                cond, err = (a.value for a in s.call.args)  # type: ignore[union-attr]
                body += [f"if (!({g.cond(cond)})) {{", f"    P->sm.parser_error = {g.ex(err)};",
                         "    return;", "}"]
            elif isinstance(s, A.MethodCallStatement) and s.call.call_kind is A.CallKind.PARSER_APPLY:
                body += _apply(g, m, s.call)
            else:
                body += g.stmt(s)
        body += _lookaheads(g, st.transition, short)
        body += _transition(g, low, m.target)
        lines += [IND + x for x in body]
    return lines


def _apply(g: CGen, m: _Machine, call: A.MethodCallExpression) -> list[str]:
    """``s.apply(packet, args)`` of a sub-parser, inlined: its states become labels here.

    Arguments are passed as the Python target passes them: a header, struct or stack
    bound to an ``out``/``inout`` parameter is the caller's object itself (an ``out`` one
    has its headers invalidated first), so what the sub-parser extracted stays when it
    ends in an error; every other argument is a copy in a pipe slot, and ``out``/
    ``inout`` ones are copied back when the sub-parser accepts (not on an error). An
    object argument that another ``out``/``inout`` argument also reaches, or whose place
    is known only at run time, is a copy too."""
    obj = getattr(call.callee, "expr", None)
    target = getattr(obj, "decl", None)
    if isinstance(target, A.ParserDecl):      # direct ``Sub.apply(...)``: its own instance
        low = g.lowered.at(m.name, obj)
        inst = _Instance(decl=target, name=getattr(low, "name", None) or f"{m.name}.{target.name}",
                         consts={}, subs={})
    else:
        got = m.subs.get(target)
        if got is None:
            raise EbpfUnsupported(call, "apply of a parser that is not an instance of this parser")
        inst = got
    decl = inst.decl
    scope: dict[Any, str] = dict(inst.consts)
    before: list[str] = []
    invalidate: list[str] = []
    after: list[str] = []
    args = [a.value for a in call.args]
    aliased = _aliased(decl.params, args)
    for p, a in zip(decl.params, args):
        t = strip(p.type_ref.type)
        if isinstance(t, T.ExternType):
            if t.name != "packet_in":
                raise EbpfUnsupported(a, f"parser {decl.name}: parameter {p.name} of type {t}")
            continue                          # the one packet, read at P->off
        is_obj = isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType, T.StackType, T.TupleType))
        writes = p.direction in (A.Direction.OUT, A.Direction.INOUT)
        dont_care = isinstance(a, A.DontCareExpression)
        if is_obj and writes and not dont_care and id(a) not in aliased and _fixed_place(a):
            lv = g.lval(a)
            scope[p] = lv
            if p.direction is A.Direction.OUT:
                invalidate += _invalidate(lv, t)
            continue
        slot = "P->" + _slot(g, f"sp_{inst.name.replace('.', '_')}_{p.name}", t, p)
        scope[p] = slot
        if is_obj:
            if not dont_care:
                src = g.lval(a) if isinstance(t, T.StackType) else g.object_value(a)
                before += g.copy_stack(slot, src) if isinstance(t, T.StackType) else [f"{slot} = {src};"]
            else:
                before.append(f"__builtin_memset(&{slot}, 0, sizeof({slot}));")
            if p.direction is A.Direction.OUT:
                invalidate += _invalidate(slot, t)
        else:
            keep = p.direction is not A.Direction.OUT and not dont_care
            before.append(f"{slot} = {g.ex(a) if keep else '0'};")
        if writes and not dont_care:
            lv = g.lval(a)
            after += g.copy_stack(lv, slot) if isinstance(t, T.StackType) else [f"{lv} = {slot};"]
    sub = _Machine(decl=decl, name=inst.name, label=g.fresh("sp_" + decl.name) + "_",
                   accept=g.fresh("sp_" + decl.name + "_accept"), subs=dict(inst.subs), codes=m.codes)
    saved = g.scopes
    g.scopes = [scope]
    try:
        init = _locals(g, sub, scope)
        states = _states(g, sub)
    finally:
        g.scopes = saved
    return (before + invalidate + init + [f"goto {sub.target('start')};"] + states
            + [f"{sub.accept}: ;"] + after)


def _slot(g: CGen, base: str, t: Any, node: Any) -> str:
    """A pipe field holding a value of type `t` (a stack: its elements and next index)."""
    name = g.fresh(base)
    if isinstance(t, T.StackType):
        elem = g.layouts.struct_name(strip(t.elem), node)
        g.pipe_fields += [f"{elem} {name}[{stack_slots(t.size)}];", f"u32 {name}__next;"]
    elif isinstance(t, (T.HeaderType, T.StructType, T.HeaderUnionType, T.TupleType)):
        g.pipe_fields.append(f"{g.layouts.struct_name(t, node)} {name};")
    else:
        g.pipe_fields.append(f"{ctype(scalar_width(t, node))} {name};")
    return name


def _invalidate(lv: str, t: Any) -> list[str]:
    """An ``out`` object at the start of the callee: its headers invalid, its stacks
    empty, its other fields kept (as the Python target's ``_invalidate``)."""
    t = strip(t)
    if isinstance(t, T.HeaderType):
        return [f"{lv}._valid = 0;"]
    if isinstance(t, T.StackType):
        out: list[str] = []
        for i in range(t.size):
            out += _invalidate(f"{lv}[{i}]", t.elem)
        return out + [f"{lv}__next = 0;"]
    if isinstance(t, (T.StructType, T.HeaderUnionType)):
        out = []
        for fname, ft in t.fields:
            out += _invalidate(f"{lv}.{cname(fname)}", ft)
        return out
    return []


def _root(e: Any) -> Any:
    """The declaration of the variable an lvalue belongs to (``h`` of ``h.eth[1]``)."""
    while isinstance(e, (A.MemberExpression, A.IndexExpression, A.SliceExpression)):
        e = e.expr
    return e.decl if isinstance(e, A.PathExpression) else None


def _aliased(params: list[A.Parameter], args: list[A.Expression]) -> set[int]:
    """Ids of the object arguments bound to ``out``/``inout`` parameters that another
    ``out``/``inout`` argument of the same call also reaches: passed as copies (the
    Python target's `aliased_object_args` for a parser's apply)."""
    roots: list[int] = []
    objs: list[tuple[int, int]] = []
    for p, a in zip(params, args):
        root = _root(a)
        if p.direction not in (A.Direction.OUT, A.Direction.INOUT) or root is None:
            continue
        roots.append(id(root))
        if isinstance(strip(p.type_ref.type),
                      (T.HeaderType, T.StructType, T.HeaderUnionType, T.StackType, T.TupleType)):
            objs.append((id(a), id(root)))
    return {a for a, r in objs if roots.count(r) > 1}


def _fixed_place(e: Any) -> bool:
    """True when the lvalue `e` names the same storage however often it is evaluated
    (fields and constant stack indexes; not ``s[i]`` with a run-time ``i`` nor ``s.last``)."""
    while not isinstance(e, A.PathExpression):
        field = isinstance(e, A.MemberExpression) and e.kind is A.MemberKind.FIELD
        if not (field or isinstance(e, A.IndexExpression) and isinstance(e.index.const_value, int)):
            return False
        e = e.expr
    return True


def _whole_bytes(e: A.Expression) -> bool:
    """True when `e` is a multiple of 8 whatever its run-time value (``n * 8``, ``n << 3``)."""
    cv = e.const_value
    if isinstance(cv, int):
        return cv % 8 == 0
    if isinstance(e, A.CastExpression):
        return _whole_bytes(e.expr)
    if isinstance(e, A.BinaryExpression):
        if e.op == "*":
            return _whole_bytes(e.left) or _whole_bytes(e.right)
        if e.op == "<<":
            sh = e.right.const_value
            return isinstance(sh, int) and sh >= 3 or _whole_bytes(e.left)
        if e.op in ("+", "-"):
            return _whole_bytes(e.left) and _whole_bytes(e.right)
    return False


def _advance(g: CGen, call: A.MethodCallExpression, short_code: int) -> list[str]:
    """``packet.advance(n)``: skip n bits (whole bytes: the kernel's packet offset counts
    bytes); past the end of the packet, PacketTooShort as on the Python target."""
    n = call.args[0].value
    if not _whole_bytes(n):
        raise EbpfUnsupported(call, "packet.advance by a number of bits that may not be whole "
                                    "bytes (the kernel's packet offsets are bytes; write n * 8)")
    return ["{", f"    u64 adv = (u64)({g.ex(n)}) / 8;",
            "    if (adv > pk_len(ctx) || P->off + adv > pk_len(ctx)) {",
            f"        P->sm.parser_error = {short_code};", "        return;", "    }",
            "    P->off += adv;", "}"]


def _lookaheads(g: CGen, node: Any, short_code: int) -> list[str]:
    """Load what each ``packet.lookahead<T>()`` under `node` reads (at the current offset,
    without advancing) into a pipe field; the expressions then read that field."""
    from softswitch.frontend.walk import walk
    out: list[str] = []
    if node is None:
        return out
    for call in walk(node):
        if not (isinstance(call, A.MethodCallExpression) and call.call_kind is A.CallKind.EXTERN_METHOD
                and getattr(call.callee, "member", None) == "lookahead"):
            continue
        t = strip(call.type)
        if isinstance(t, T.HeaderType):
            hl = g.layouts.header(t, call)
            name = g.fresh("la_" + t.name)
            g.pipe_fields.append(f"{g.layouts.struct_name(t, call)} {name};")
            nbytes, fields = hl.size_bytes, [(f"P->{name}.{cname(f)}", off, w) for f, off, w in hl.fields]
            fields.append((f"P->{name}._valid", -1, 0))
        else:
            w = g.width(call)
            if w % 8 or w > 128:
                raise EbpfUnsupported(call, f"lookahead of {w} bits (whole bytes up to 128 bits)")
            name = g.fresh("la")
            g.pipe_fields.append(f"{wide(w)} {name};")
            nbytes, fields = w // 8, [(f"P->{name}", 0, w)]
        g.max_header = max(g.max_header, nbytes)
        out += [f"if (pk_load(ctx, P->off, P->buf, {nbytes}) < 0) {{",
                f"    P->sm.parser_error = {short_code};", "    return;", "}"]
        for target, off, w in fields:
            out.append(f"{target} = 1;" if off < 0 else f"{target} = {read_bits('P->buf', off, w)};")
        g.precomputed[call] = f"P->{name}"
    return out


def _extract(g: CGen, call: A.MethodCallExpression, short_code: int) -> list[str]:
    target = call.args[0].value
    t = strip(target.type)
    if not isinstance(t, T.HeaderType):
        raise EbpfUnsupported(call, f"extract into {t}")
    hl = g.layouts.header(t, call)
    g.max_header = max(g.max_header, hl.size_bytes)
    out: list[str] = []
    after: list[str] = []
    if isinstance(target, A.MemberExpression) and target.kind is A.MemberKind.STACK_NEXT:
        st = strip(target.expr.type)
        base = g.lval(target.expr)
        out += [f"if ({base}__next >= {st.size}) {{", f"    P->sm.parser_error = {g.stack_error};",
                "    return;", "}"]
        lv = f"{base}[{base}__next & {stack_slots(st.size) - 1}]"
        after = [f"{base}__next += 1;"]
    elif isinstance(target, A.MemberExpression) and isinstance(target.expr, A.MemberExpression) \
            and target.expr.kind is A.MemberKind.STACK_NEXT:
        # u.next.member of a stack of header unions: fills the next union (that member
        # valid, the others not) and moves on
        st = strip(target.expr.expr.type)
        base = g.lval(target.expr.expr)
        out += [f"if ({base}__next >= {st.size}) {{", f"    P->sm.parser_error = {g.stack_error};",
                "    return;", "}"]
        elem = f"{base}[{base}__next & {stack_slots(st.size) - 1}]"
        lv = f"{elem}.{cname(target.member)}"
        after = [f"{elem}.{cname(f)}._valid = 0;" for f, _ in strip(st.elem).fields
                 if f != target.member] + [f"{base}__next += 1;"]
    else:
        lv = g.lval(target)
        if isinstance(target, A.MemberExpression) and isinstance(strip(target.expr.type), T.HeaderUnionType):
            after = g.union_only_valid(target)      # one valid member at a time
    if (len(call.args) == 2) != (hl.varbit is not None):
        raise EbpfUnsupported(call, f"extract of {t.name} with {len(call.args)} arguments")
    vb_lines: list[str] = []
    if hl.varbit is not None:
        # BMv2's order of checks: whole bytes, then the maximum, then the data left
        vname, vmax = hl.varbit
        v = f"{lv}.{cname(vname)}"
        e = g.errors
        out += [f"P->vb = (u32)({g.ex(call.args[1].value)});",
                f"if (P->vb & 7) {{ P->sm.parser_error = {e.index('ParserInvalidArgument')}; return; }}",
                f"if (P->vb > {vmax}) {{ P->sm.parser_error = {e.index('HeaderTooShort')}; return; }}",
                f"if (P->off + {hl.size_bytes} + P->vb / 8 > pk_len(ctx)) {{",
                f"    P->sm.parser_error = {short_code};", "    return;", "}"]
        vb_lines = ["{", "    u32 n = P->vb / 8;",
                    (f"    if (n > 0 && pk_load(ctx, P->off + {hl.size_bytes}, {v}, "
                    f"{_nonzero_len('n', stack_slots(vmax // 8 + 1))}) < 0) {{"),
                    f"        P->sm.parser_error = {short_code};", "        return;", "    }",
                    f"    {v}__bits = P->vb;", "    P->off += n;", "}"]
    if hl.size_bytes:      # a header of only a varbit field has no fixed part to load
        out += [f"if (pk_load(ctx, P->off, P->buf, {hl.size_bytes}) < 0) {{",
                f"    P->sm.parser_error = {short_code};", "    return;", "}"]
    for fname, off, w in hl.fields:
        out.append(f"{lv}.{cname(fname)} = {read_bits('P->buf', off, w)};")
    out += vb_lines + [f"{lv}._valid = 1;", f"P->off += {hl.size_bytes};"] + after
    return out


def _nonzero_len(n: str, size: int) -> str:
    """C expression: the byte count `n` (known to be 1..`size`) in a form the verifier
    sees as 1..`size` too: clang may turn ``n > 0`` into a test of the value `n` came
    from (``vb >= 8``), after which the verifier still thinks `n` may be 0, which a
    helper's length may not be; the mask stays behind an empty asm."""
    return (f"({{ u32 m_ = {n} - 1; asm volatile(\"\" : \"+r\"(m_)); "
            f"(m_ & {size - 1}) + 1; }})")


def _match_cond(g: CGen, key: str, m: LoweredMatch) -> str | None:
    if m.kind == "default":
        return None
    if m.kind == "value_set":
        vs = value_set_of(m.node)
        fn = g.value_set_fns.get(vs)
        if fn is None:
            raise EbpfUnsupported(m.node, f"value_set {getattr(vs, 'name', '?')} of another parser")
        return f"{fn}({key})"
    if m.kind == "value" and m.a is not None:
        return f"{key} == {g.ex(m.a)}"
    if m.kind == "mask" and m.a is not None and m.b is not None:
        mask = g.ex(m.b)
        return f"({key} & {mask}) == ({g.ex(m.a)} & {mask})"
    if m.kind == "range" and m.a is not None and m.b is not None:
        return f"({key} >= {g.ex(m.a)} && {key} <= {g.ex(m.b)})"
    raise EbpfUnsupported(m.node, f"keyset {type(m.node).__name__}")


def _transition(g: CGen, st: LoweredState, label: Callable[[str], str]) -> list[str]:
    if not st.is_select:
        return ["goto st_reject;"] if st.next_state is None else [f"goto {label(st.next_state.decl.name)};"]
    keys = [g.ex(k) for k in st.keys]
    out = ["{"]
    names = []
    for i, k in enumerate(keys):
        names.append(f"s{i}")
        out.append(f"    {wide(g.width(st.keys[i]))} s{i} = {k};")
    for case in st.cases:
        if case.value_set is not None:
            # a value_set of a struct: the keys' values concatenated, the first most significant
            ks = case.node.keysets[0]
            widths = [g.width(k) for k in st.keys]
            if sum(widths) > 64:
                raise EbpfUnsupported(ks, f"value_set over {sum(widths)} bits of select keys (at most 64)")
            cat = "0ULL"
            for n, w in zip(names, widths):
                cat = f"(({cat}) << {w}) | ({n} & {(1 << w) - 1:#x}ULL)"
            cond = _match_cond(g, cat, LoweredMatch(kind="value_set", node=ks, a=case.value_set))
            out.append(f"    if ({cond}) goto {label(case.next_state.decl.name)};")
            continue
        conds = [c for c in (_match_cond(g, n, m) for n, m in zip(names, case.matches)) if c is not None]
        target = f"goto {label(case.next_state.decl.name)};"
        out.append(f"    if ({' && '.join(conds)}) {target}" if conds else f"    {target}")
    # no case matched: error.NoMatch ends parsing (P4 spec 12.6, the Python target's)
    no_match = g.errors.index("NoMatch") if "NoMatch" in g.errors else 2
    out += [f"    P->sm.parser_error = {no_match};", "    return;", "}"]
    return out


def _emitted(g: CGen, e: A.Expression) -> list[tuple[str, HeaderLayout, Any]]:
    return _emitted_at(g, g.lval(e), e.type, e)


def _emitted_at(g: CGen, base: str, t: Any, e: A.Expression) -> list[tuple[str, HeaderLayout, Any]]:
    """The headers ``emit`` of a value of type `t` at C path `base` writes, in order:
    a header, a stack's elements, a struct's or a union's fields (recursively)."""
    t = strip(t)
    if isinstance(t, T.HeaderType):
        return [(base, g.layouts.header(t, e), e)]
    if isinstance(t, T.StackType) and isinstance(strip(t.elem), (T.HeaderType, T.HeaderUnionType)):
        out = []
        for i in range(t.size):
            out += _emitted_at(g, f"{base}[{i}]", t.elem, e)
        return out
    if isinstance(t, (T.StructType, T.HeaderUnionType)):
        out = []
        for fname, ft in t.fields:
            if not isinstance(strip(ft), (T.HeaderType, T.StackType, T.StructType, T.HeaderUnionType)):
                raise EbpfUnsupported(e, f"emit of {ft} field {fname}")
            out += _emitted_at(g, f"{base}.{cname(fname)}", ft, e)
        return out
    raise EbpfUnsupported(e, f"emit of {t}")


def gen_deparser(g: CGen, decl: A.ControlDecl) -> str:
    roles = V1.block_roles("dep")
    g.scopes = [{p: f"P->{r}" for p, r in zip(decl.params, roles) if r != "packet"}]
    if decl.locals:
        raise EbpfUnsupported(decl.locals[0], "declarations in the deparser")
    emits: list[tuple[str, HeaderLayout, Any]] = []
    for s in decl.body.statements:
        call = _is_method(s, "emit")
        if call is None:
            raise EbpfUnsupported(s, "deparser statement other than packet.emit(...)")
        emits += _emitted(g, call.args[0].value)
    lines = ["u32 len = 0;"]
    for lv, hl, _ in emits:
        extra = f" + {lv}.{cname(hl.varbit[0])}__bits / 8" if hl.varbit else ""
        lines.append(f"if ({lv}._valid) len += {hl.size_bytes}{extra};")
        g.max_header = max(g.max_header, hl.size_bytes)
    lines += ["if (resize_headers(ctx, P, len) < 0)", "    return -1;", "u32 o = 0;"]
    for lv, hl, _ in emits:
        lines.append(f"if ({lv}._valid) {{")
        pieces = [(f"{lv}.{cname(f)}", w) for f, _, w in hl.fields]
        if hl.size_bytes:          # a header of only a varbit field has no fixed part
            lines += [IND + x for x in write_bytes("P->buf", pieces)]
            lines += [f"    if (pk_store(ctx, o, P->buf, {hl.size_bytes}) < 0) return -1;",
                      f"    o += {hl.size_bytes};"]
        if hl.varbit is not None:
            v = f"{lv}.{cname(hl.varbit[0])}"
            lines += [f"    u32 n = ({v}__bits / 8) & {stack_slots(hl.varbit[1] // 8 + 1) - 1};",
                      (f"    if (n > 0 && pk_store(ctx, o, {v}, "
                      f"{_nonzero_len('n', stack_slots(hl.varbit[1] // 8 + 1))}) < 0) return -1;"),
                      "    o += n;"]
        lines.append("}")
    lines.append("return 0;")
    return ("/* deparser " + decl.name + " */\n"
            "static __always_inline int run_deparser(P4_CTX *ctx, struct pipe *P) {\n"
            + "".join(IND + x + "\n" for x in lines) + "}")
