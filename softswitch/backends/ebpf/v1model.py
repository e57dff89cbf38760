"""What the eBPF back end needs of the v1model architecture, asked of softswitch's
architecture object (`softswitch.v1model.V1MODEL`, or the program's `arch`).

The architecture object says what each extern does (`ExternSemantics`: an op,
the metadata it writes, a request, a payload flag), the package and its blocks,
and the drop port; this module turns those answers into C. What the object does
not describe yet lives here, in one place: the role of each block parameter
(packet, headers, metadata, standard metadata).

* `block_roles(param)`: the roles of a block's apply parameters, by position;
* `lower_extern(gen, call)`: C statements of an extern function call, or None when
  the architecture does not know it (the generator then refuses it by name).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch.architecture import ExternOp
from softswitch.backends.ebpf.clones import lower_clone, lower_pass_request
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.hashes_c import hash_c
from softswitch.backends.ebpf.layout import cname, strip, words16
from softswitch.frontend import ast as A
from softswitch.frontend import types as T

if TYPE_CHECKING:  # pragma: no cover
    from softswitch.backends.ebpf.blocks import CGen

BLOCKS = ("p", "vr", "ig", "eg", "ck", "dep")   # V1Switch's blocks, whose roles follow
# role of each apply parameter, by block (position in the parameter list)
_ROLES: dict[str, tuple[str, ...]] = {
    "p": ("packet", "hdr", "meta", "sm"),
    "vr": ("hdr", "meta"),
    "ig": ("hdr", "meta", "sm"),
    "eg": ("hdr", "meta", "sm"),
    "ck": ("hdr", "meta"),
    "dep": ("packet", "hdr"),
}

# error codes the kernel program sets itself (names of core.p4's errors)
PACKET_TOO_SHORT = "PacketTooShort"


def block_roles(block: str) -> tuple[str, ...]:
    return _ROLES[block]


def _algorithm(algo: A.Expression) -> str | None:
    return algo.member if isinstance(algo, A.MemberExpression) else None


def _field_list(gen: CGen, data: A.Expression) -> list[tuple[str, int]]:
    if isinstance(data, A.ListExpression):
        return [(gen.ex(e), gen.width(e)) for e in data.elems]
    return [(gen.ex(data), gen.width(data))]


def _split_varbit(gen: CGen, data: A.Expression) -> tuple[A.Expression, tuple[str, int] | None]:
    """A field list ending in a varbit field: the list without it, and its (C path, max bits)."""
    if isinstance(data, A.ListExpression) and data.elems:
        last = strip(data.elems[-1].type)
        if isinstance(last, T.VarbitType):
            rest = A.ListExpression(loc=data.loc, elems=data.elems[:-1])
            rest.type = data.type
            return rest, (gen.lval(data.elems[-1]), last.max_width)
    return data, None


def _at_most_64(gen: CGen, call: A.MethodCallExpression, *values: A.Expression) -> None:
    """Results, bases and bounds of hashes, checksums and ``random`` are 64-bit C values."""
    for v in values:
        if isinstance(strip(v.type), T.BitsType) and gen.width(v) > 64:
            raise EbpfUnsupported(call, f"{gen.width(v)}-bit {v.__class__.__name__} argument "
                                        "(at most 64 bits here)")


def _checksum(gen: CGen, call: A.MethodCallExpression, verify: bool, *, payload: bool = False
              ) -> list[str]:
    cond, data, field, algo = (a.value for a in call.args)
    _at_most_64(gen, call, field)
    fw = gen.width(field)
    lines = [f"if ({gen.cond(cond)}) {{"]
    data, varbit = _split_varbit(gen, data)
    pieces = _field_list(gen, data)
    if payload:
        lines += ["    " + x for x in _csum16_with_payload(gen, call, _algorithm(algo), pieces, varbit)]
    else:
        lines += ["    " + x for x in hash_c(_algorithm(algo), pieces, call, "s", varbit)]
    if verify:
        lines.append(f"    if ((u64)({gen.ex(field)}) != (s & {(1 << fw) - 1:#x}ULL)) "
                     "P->sm.checksum_error = 1;")
    else:
        lines.append(f"    {gen.lval(field)} = s & {(1 << fw) - 1:#x}ULL;")
    lines.append("}")
    return lines


def _csum16_with_payload(gen: CGen, call: A.MethodCallExpression, algo: str | None,
                         pieces: list[tuple[str, int]], varbit: tuple[str, int] | None) -> list[str]:
    """csum16 over the field list, then the unparsed payload (its sum, ``P->payload_sum``,
    is taken once after the parser): TCP/UDP checksums."""
    total = sum(w for _, w in pieces)
    if algo != "csum16" or total % 16:
        raise EbpfUnsupported(call, f"{algo} with the payload (csum16 over whole 16-bit words of "
                                    "fields only: other algorithms would walk the payload byte by "
                                    "byte past the verifier's budget)")
    gen.payload_sum_used = True
    if "u32 payload_sum;" not in gen.pipe_fields:
        gen.pipe_fields.append("u32 payload_sum;")
    if varbit is None:
        body = ["u64 s = 0;"] + [f"s += {w};" for w in words16(pieces)]
        body.append("s += P->payload_sum;")
    else:
        # after an odd number of varbit bytes the payload's words straddle a byte: its
        # ones' complement sum is then the byte-swapped one
        body = hash_c(algo, pieces, call, "s", varbit)[:-4]
        n = f"({varbit[0]}__bits / 8)"
        body.append(f"s += ({n} & 1) ? (((P->payload_sum & 0xff) << 8) | (P->payload_sum >> 8)) "
                    ": P->payload_sum;")
    body += ["s = (s & 0xffff) + (s >> 16);"] * 3
    return body + ["s = (~s) & 0xffff;"]


def _hash(gen: CGen, call: A.MethodCallExpression) -> list[str]:
    """``hash(out, algo, base, data, max)``: out = base + (h % max), or base when max is 0."""
    out, algo, base, data, maxv = (a.value for a in call.args)
    _at_most_64(gen, call, out, base, *([] if isinstance(maxv.const_value, int) else [maxv]))
    mask = f"{(1 << gen.width(out)) - 1:#x}ULL"
    lines = ["{"] + ["    " + x for x in hash_c(_algorithm(algo), _field_list(gen, data), call, "h")]
    base_c = f"(u64)({gen.ex(base)})"
    if isinstance(maxv.const_value, int) and maxv.const_value >> 64:
        lines.append(f"    {gen.lval(out)} = ({base_c} + h) & {mask};")  # h % max == h
    else:
        lines += [f"    u64 mx = {gen.ex(maxv)};",
                  f"    {gen.lval(out)} = (mx ? ({base_c} + h % mx) : {base_c}) & {mask};"]
    lines.append("}")
    return lines


def _random(gen: CGen, call: A.MethodCallExpression) -> list[str]:
    """``random(out, lo, hi)``: uniform in [lo, hi] (lo when hi < lo), from the kernel's
    pseudo-random generator (64 bits from two draws; the modulo bias is under 2^-32)."""
    out, lo, hi = (a.value for a in call.args)
    _at_most_64(gen, call, out, lo, hi)
    mask = f"{(1 << gen.width(out)) - 1:#x}ULL"
    return ["{",
            f"    u64 lo = {gen.ex(lo)}, hi = {gen.ex(hi)}, r = lo;",
            "    if (hi > lo) {",
            "        u64 x = ((u64)bpf_get_prandom_u32() << 32) | bpf_get_prandom_u32();",
            "        u64 span = hi - lo + 1;",
            "        r = span ? lo + x % span : x;",
            "    }",
            f"    {gen.lval(out)} = r & {mask};",
            "}"]


def lower_extern(gen: CGen, call: A.MethodCallExpression) -> list[str] | None:
    """C statements for an extern function call, from what the architecture says it does;
    None if the architecture does not know it."""
    name = getattr(call.callee_decl, "name", None) or ""
    sem = gen.arch.semantics(name)
    if sem is None:
        return None
    if sem.op is ExternOp.SET_METADATA:
        return [f"P->sm.{cname(field)} = {value};" for field, value in sem.writes]
    if sem.op is ExternOp.HASH:
        return _hash(gen, call)
    if sem.op is ExternOp.RANDOM:
        return _random(gen, call)
    if sem.op is ExternOp.DIGEST:
        return gen.digest(call)
    if sem.op is ExternOp.REQUEST and sem.request == "truncate":
        # egress's request replaces ingress's (p4_pipeline keeps both); applied after the deparser
        return [f"P->truncate = (u32)({gen.ex(call.args[0].value)});"]
    if sem.op is ExternOp.REQUEST and sem.request == "clone":
        return lower_clone(gen, call, sem.params)
    if sem.op is ExternOp.REQUEST and sem.request in ("resubmit", "recirculate"):
        return lower_pass_request(gen, call, str(sem.request), sem.params)
    if sem.op in (ExternOp.CHECKSUM_VERIFY, ExternOp.CHECKSUM_UPDATE):
        return _checksum(gen, call, sem.op is ExternOp.CHECKSUM_VERIFY, payload=bool(sem.with_payload))
    raise EbpfUnsupported(call, f"extern {name} ({sem.op.name.lower()})")


def extern_method_is_noop(gen: CGen, call: A.MethodCallExpression) -> bool:
    """A method the table does itself (`direct_counter.count()`: the hit entry is counted)."""
    obj = getattr(call.callee, "expr", None)
    decl = getattr(obj, "decl", None)
    tname = getattr(getattr(decl, "type_decl", None), "name", None)
    sem = gen.arch.semantics(f"{tname}.{getattr(call.callee, 'member', '')}")
    return sem is not None and sem.op is ExternOp.DIRECT_COUNT
