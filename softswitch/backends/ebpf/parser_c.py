"""The parser (a chain of labels over ``pk_load``) and the deparser.

Both reach the packet only through the hook's primitives (`hooks`: ``pk_load``,
``pk_store``, ``pk_len``, ``resize_headers``), so the same C runs on tc and XDP.

Parser: each state is a label; ``extract`` loads the header's bytes into the scratch
buffer at the running offset ``P->off`` and unpacks its fields; a packet too short
sets ``parser_error`` and ends parsing (v1model: ingress still runs); ``select`` is an
if-chain over values, masks and ranges. Loops (over header stacks, TLVs) are bounded
by a count of states passed (ParserTimeout beyond it), which the verifier can follow.

Deparser: a straight sequence of ``emit``; the emitted headers' total length replaces
the parsed bytes, then each valid header's bytes are packed and stored. When the length
differs, ``resize_headers`` makes or removes the room: on tc ``bpf_skb_adjust_room``
(fast, but only for IP packets that keep their IP header), else the packet grows at
its head (``bpf_skb_change_head``) or its payload moves forward in 64-byte chunks and
the tail is cut (``bpf_skb_change_tail``); on XDP the frame's start moves
(``bpf_xdp_adjust_head``).
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.ebpf import v1model as V1
from softswitch.backends.ebpf.blocks import IND, CGen
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import (
    HeaderLayout,
    cname,
    read_bits,
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


def _state_label(st: A.ParserState) -> str:
    return f"st_{cname(st.name)}"


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
    init: list[str] = []
    for d in decl.locals:
        if isinstance(d, A.VariableDecl):
            init += g.local_var(d, scope)
        elif isinstance(d, A.ConstDecl):
            continue                         # folded into the expressions that use it
        elif isinstance(d, A.ValueSetDecl):
            gen_value_set(g, d, control_plane_name(d, decl.name), width_of(d.elem_type.type))
        else:
            raise EbpfUnsupported(d, f"parser local {type(d).__name__} {d.name}")
    short = errors.index(V1.PACKET_TOO_SHORT) if V1.PACKET_TOO_SHORT in errors else 1
    g.stack_error = errors.index("StackOutOfBounds") if "StackOutOfBounds" in errors else 3
    timeout = errors.index("ParserTimeout") if "ParserTimeout" in errors else 5
    lines = list(init) + ["u32 steps = 0;", "goto st_start;"]
    for st, low in zip(decl.states, g.lowered.states(decl)):
        lines.append(f"{_state_label(st)}:")
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
            else:
                body += g.stmt(s)
        body += _lookaheads(g, st.transition, short)
        body += _transition(g, low)
        lines += [IND + x for x in body]
    lines += ["st_accept:", "st_reject:", "    return;"]
    return ("/* parser " + decl.name + " */\n"
            "static __always_inline void run_parser(P4_CTX *ctx, struct pipe *P) {\n"
            + "".join(IND + x + "\n" if not x.endswith(":") else x + "\n" for x in lines) + "}")


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
    else:
        lv = g.lval(target)
        if isinstance(target, A.MemberExpression) and isinstance(strip(target.expr.type), T.HeaderUnionType):
            if isinstance(target.expr, A.MemberExpression) and target.expr.kind is A.MemberKind.STACK_NEXT:
                raise EbpfUnsupported(call, "extract into a stack of header unions")
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
        vb_lines = ["{", f"    u32 n = (P->vb / 8) & {stack_slots(vmax // 8 + 1) - 1};",
                    f"    if (n > 0 && pk_load(ctx, P->off + {hl.size_bytes}, {v}, n) < 0) {{",
                    f"        P->sm.parser_error = {short_code};", "        return;", "    }",
                    f"    {v}__bits = P->vb;", "    P->off += n;", "}"]
    if hl.size_bytes:      # a header of only a varbit field has no fixed part to load
        out += [f"if (pk_load(ctx, P->off, P->buf, {hl.size_bytes}) < 0) {{",
                f"    P->sm.parser_error = {short_code};", "    return;", "}"]
    for fname, off, w in hl.fields:
        out.append(f"{lv}.{cname(fname)} = {read_bits('P->buf', off, w)};")
    out += vb_lines + [f"{lv}._valid = 1;", f"P->off += {hl.size_bytes};"] + after
    return out


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


def _transition(g: CGen, st: LoweredState) -> list[str]:
    if not st.is_select:
        return ["goto st_reject;"] if st.next_state is None else [f"goto {_state_label(st.next_state.decl)};"]
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
            out.append(f"    if ({cond}) goto {_state_label(case.next_state.decl)};")
            continue
        conds = [c for c in (_match_cond(g, n, m) for n, m in zip(names, case.matches)) if c is not None]
        target = f"goto {_state_label(case.next_state.decl)};"
        out.append(f"    if ({' && '.join(conds)}) {target}" if conds else f"    {target}")
    out += ["    goto st_reject;", "}"]
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
                      f"    if (n > 0 && pk_store(ctx, o, {v}, n) < 0) return -1;",
                      "    o += n;"]
        lines.append("}")
    lines.append("return 0;")
    return ("/* deparser " + decl.name + " */\n"
            "static __always_inline int run_deparser(P4_CTX *ctx, struct pipe *P) {\n"
            + "".join(IND + x + "\n" for x in lines) + "}")
