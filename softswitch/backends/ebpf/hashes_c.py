"""v1model's hash algorithms over a field list, as C: the same results as
`softswitch.externs.hashes` (BMv2's), byte for byte.

The field list is packed most significant bit first into ``P->hb`` (a partial last
byte padded with zero bits, as BMv2 packs it); CRCs run bit by bit over those bytes
(the byte count is a compile-time constant, so the loops unroll and the verifier
sees straight code); csum16 and xor16 work on 16-bit words of the fields directly.
"""
from __future__ import annotations

from collections.abc import Sequence

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import words16, write_bytes
from softswitch.externs.hashes import reflected_crc_table

ALGORITHMS = ("crc16", "crc32", "identity", "csum16", "xor16")
# crc16_custom / crc32_custom: (config cell, width); until the runtime configures them
# (`hash_set_custom`, BMv2's set_crc*_parameters) they compute crc16 / crc32
CUSTOM_CRCS = {"crc16_custom": (0, 16), "crc32_custom": (1, 32)}
CUSTOM_DEFAULTS = {"crc16_custom": (0x8005, 0, 0, True, True),
                   "crc32_custom": (0x04C11DB7, 0xFFFFFFFF, 0xFFFFFFFF, True, True)}
MAX_HASH_BYTES = 64


def hash_c(algo: str | None, pieces: Sequence[tuple[str, int]], node: object,
           result: str, varbit: tuple[str, int] | None = None) -> list[str]:
    """C statements setting ``u64 {result}`` to the raw hash of `pieces` (expr, width),
    then of `varbit` (a varbit field at the end of the list: its C path and maximum
    bits; csum16 and xor16 only, after whole 16-bit words: IPv4 options)."""
    if varbit is not None:
        return _words_then_varbit(algo, pieces, node, result, varbit)
    if algo == "random":      # a random 32-bit value, whatever the fields (as BMv2's)
        return [f"u64 {result} = bpf_get_prandom_u32();"]
    if algo not in ALGORITHMS and algo not in CUSTOM_CRCS:
        raise EbpfUnsupported(node, f"hash algorithm {algo}")
    total = sum(w for _, w in pieces)
    nbytes = (total + 7) // 8
    if nbytes > MAX_HASH_BYTES:
        raise EbpfUnsupported(node, f"a field list of {nbytes} bytes to hash (at most {MAX_HASH_BYTES})")
    if algo == "csum16":
        if total % 8:
            raise EbpfUnsupported(node, f"csum16 over {total} bits (not whole bytes)")
        out = [f"u64 {result} = 0;"] + [f"{result} += {w};" for w in words16(pieces)]
        out += [f"{result} = ({result} & 0xffff) + ({result} >> 16);"] * 3
        return out + [f"{result} = (~{result}) & 0xffff;"]
    if algo == "xor16":
        if total % 8:
            raise EbpfUnsupported(node, f"xor16 over {total} bits (not whole bytes)")
        return [f"u64 {result} = 0;"] + [f"{result} ^= {w};" for w in words16(pieces)]
    out = write_bytes("P->hb", pieces)
    if algo == "identity":
        out.append(f"u64 {result} = 0;")
        out += [f"{result} = ({result} << 8) | P->hb[{i}];" for i in range(max(0, nbytes - 8), nbytes)]
        return out
    if algo in CUSTOM_CRCS:
        return out + _custom_crc(algo, nbytes, result)
    init, final = (0, 0) if algo == "crc16" else (0xFFFFFFFF, 0xFFFFFFFF)
    # table-driven, one map lookup per byte, unrolled: a branch per bit would multiply
    # the paths the verifier walks past its budget
    out += [f"u64 {result} = {init:#x};",
            "#pragma unroll",
            f"for (int i = 0; i < {nbytes}; i++) {{",
            f"    u32 ix = ({result} ^ P->hb[i]) & 0xff;",
            f"    u32 *t = p4_{algo}_table.lookup(&ix);",
            f"    {result} = ({result} >> 8) ^ (t ? *t : 0);",
            "}",
            f"{result} ^= {final:#x};"]
    return out


def _words_then_varbit(algo: str | None, pieces: Sequence[tuple[str, int]], node: object,
                       result: str, varbit: tuple[str, int]) -> list[str]:
    total = sum(w for _, w in pieces)
    if algo not in ("csum16", "xor16") or total % 16:
        raise EbpfUnsupported(node, f"a varbit field in the field list of {algo} (csum16 and xor16 "
                                    "after whole 16-bit words only)")
    path, max_bits = varbit
    nmax = max_bits // 8
    op = "+=" if algo == "csum16" else "^="
    out = [f"u64 {result} = 0;"] + [f"{result} {op} {w};" for w in words16(pieces)]
    out += ["{", f"    u32 n = {path}__bits / 8;",
            f"    for (u32 i = 0; i < {(nmax + 1) // 2}; i++) {{",
            "        u32 j = 2 * i;",
            f"        if (j < n) {result} {op} ((u64){path}[j] << 8) | (j + 1 < n ? {path}[j + 1] : 0);",
            "    }", "}"]
    if algo == "csum16":
        out += [f"{result} = ({result} & 0xffff) + ({result} >> 16);"] * 3
        out.append(f"{result} = (~{result}) & 0xffff;")
    return out


def _rev8(x: str) -> list[str]:
    return [f"{x} = (({x} & 0xF0) >> 4) | (({x} & 0x0F) << 4);",
            f"{x} = (({x} & 0xCC) >> 2) | (({x} & 0x33) << 2);",
            f"{x} = (({x} & 0xAA) >> 1) | (({x} & 0x55) << 1);"]


def _custom_crc(algo: str, nbytes: int, result: str) -> list[str]:
    """A CRC whose parameters the runtime sets: MSB-first table in ``p4_<algo>_table``,
    initial value, final xor and reflections in ``p4_crc_custom_cfg`` (as
    `softswitch.externs.hashes.make_crc`); reflections are selected without branches,
    so the unrolled loop stays one path for the verifier."""
    cell, width = CUSTOM_CRCS[algo]
    m = (1 << width) - 1
    rev = ["ro = ((ro >> 1) & 0x55555555) | ((ro & 0x55555555) << 1);",
           "ro = ((ro >> 2) & 0x33333333) | ((ro & 0x33333333) << 2);",
           "ro = ((ro >> 4) & 0x0F0F0F0F) | ((ro & 0x0F0F0F0F) << 4);",
           "ro = ((ro >> 8) & 0x00FF00FF) | ((ro & 0x00FF00FF) << 8);",
           "ro = (ro >> 16) | (ro << 16);"]
    if width == 16:
        rev.append("ro = ro >> 16;")
    return [f"u32 cc_ix = {cell};",
            "struct p4_crc_cfg *cc = p4_crc_custom_cfg.lookup(&cc_ix);",
            "u32 rin = cc ? -(cc->refl_in & 1) : 0, rout = cc ? -(cc->refl_out & 1) : 0;",
            f"u64 {result} = cc ? cc->init : 0;",
            "#pragma unroll",
            f"for (int i = 0; i < {nbytes}; i++) {{",
            "    u32 b = P->hb[i], rb = b;"]  + ["    " + x for x in _rev8("rb")] + [
            "    b = b ^ ((rb ^ b) & rin);",
            f"    u32 ix = (({result} >> {width - 8}) ^ b) & 0xff;",
            f"    u32 *t = p4_{algo}_table.lookup(&ix);",
            f"    {result} = (({result} << 8) & {m:#x}) ^ (t ? *t : 0);",
            "}",
            f"{{ u32 ro = (u32){result};"] + ["    " + x for x in rev] + [
            f"    {result} = ({result} ^ ((ro ^ {result}) & rout)) & {m:#x}; }}",
            f"{result} ^= cc ? cc->final_xor : 0;"]


def crc_table(algo: str) -> list[int]:
    """The reflected CRC table the kernel's ``p4_<algo>_table`` map holds."""
    return reflected_crc_table(0xA001 if algo == "crc16" else 0xEDB88320)
