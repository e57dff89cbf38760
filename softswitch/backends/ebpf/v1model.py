"""What the eBPF back end knows of the v1model architecture, behind one narrow interface.

Why one module: the architecture's rules (which block gets which parameter, the drop
port, what each extern does) are the only v1model knowledge the generator needs, and
softswitch is turning v1model into an architecture plug-in; this module is the single
place that object will serve later. The generator asks for:

* `BLOCKS` and `block_roles(param)`: the six V1Switch blocks and, per block, the role
  of each parameter (packet, headers, metadata, standard metadata);
* `DROP_PORT`: the ``egress_spec`` that drops;
* `lower_extern(gen, call)`: C statements of a v1model extern function call, or None
  when the extern is not v1model's (the generator then refuses it by name).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.hashes_c import hash_c
from softswitch.frontend import ast as A

if TYPE_CHECKING:  # pragma: no cover
    from softswitch.backends.ebpf.blocks import CGen

PACKAGE = "V1Switch"
BLOCKS = ("p", "vr", "ig", "eg", "ck", "dep")
DROP_PORT = 511
STANDARD_METADATA = "standard_metadata_t"

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


def _checksum(gen: CGen, call: A.MethodCallExpression, verify: bool) -> list[str]:
    cond, data, field, algo = (a.value for a in call.args)
    fw = gen.width(field)
    lines = [f"if ({gen.cond(cond)}) {{"]
    lines += ["    " + x for x in hash_c(_algorithm(algo), _field_list(gen, data), call, "s")]
    if verify:
        lines.append(f"    if ((u64)({gen.ex(field)}) != (s & {(1 << fw) - 1:#x}ULL)) "
                     "P->sm.checksum_error = 1;")
    else:
        lines.append(f"    {gen.lval(field)} = s & {(1 << fw) - 1:#x}ULL;")
    lines.append("}")
    return lines


def _hash(gen: CGen, call: A.MethodCallExpression) -> list[str]:
    """``hash(out, algo, base, data, max)``: out = base + (h % max), or base when max is 0."""
    out, algo, base, data, maxv = (a.value for a in call.args)
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


def lower_extern(gen: CGen, call: A.MethodCallExpression) -> list[str] | None:
    """C statements for a v1model extern function call; None if it is not one we know."""
    name = getattr(call.callee_decl, "name", None)
    if name == "mark_to_drop":
        return [f"P->sm.egress_spec = {DROP_PORT};"]
    if name in ("verify_checksum", "update_checksum"):
        return _checksum(gen, call, name == "verify_checksum")
    if name == "hash":
        return _hash(gen, call)
    if name in ("verify_checksum_with_payload", "update_checksum_with_payload"):
        raise EbpfUnsupported(call, f"{name} (checksums over the payload)")
    return None


def extern_method_is_noop(call: A.MethodCallExpression) -> bool:
    """`direct_counter.count()`: the table counts its hits itself."""
    obj = getattr(call.callee, "expr", None)
    decl = getattr(obj, "decl", None)
    tname = getattr(getattr(decl, "type_decl", None), "name", None)
    return tname == "direct_counter" and getattr(call.callee, "member", "") == "count"
