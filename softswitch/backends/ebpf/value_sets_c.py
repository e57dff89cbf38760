"""Parser value sets on the eBPF target: ``value_set<T>(N)`` in ``select``.

The members (value, mask) live in a BPF array of N cells with a count beside it
(``vs_X``, ``vs_X_n``); a ``select`` case on the set calls ``vs_X_match(key)``, a
bounded scan that is true when ``key & mask == value`` for a member, as the Python
target's `ValueSet.match`. A set of a struct over several select keys matches their
values concatenated, the first key most significant (at most 64 bits here).
`ValueSetMirror` observes the runtime's `ValueSet` (runtime API, STF, P4Runtime
ValueSetEntry, reconcile) and rewrites the array and its count on each change.
"""
from __future__ import annotations

import ctypes
from typing import TYPE_CHECKING, Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.externs.stateful import ValueSet
from softswitch.frontend import ast as A

if TYPE_CHECKING:  # pragma: no cover
    from softswitch.backends.ebpf.blocks import CGen
    from softswitch.backends.ebpf.kernel import LoadedProgram

C_TYPES = "struct p4_vs_entry { u64 v; u64 m; };"


def gen_value_set(g: CGen, decl: A.ValueSetDecl, name: str, width: int) -> None:
    """The maps and the match function of one value set (control-plane name `name`)."""
    size = decl.size.const_value
    if not isinstance(size, int) or size <= 0:
        raise EbpfUnsupported(decl, f"value_set {decl.name}: size must be a positive constant")
    if width > 64:
        raise EbpfUnsupported(decl, f"value_set {decl.name} of {width} bits (at most 64)")
    if not g.value_set_maps:
        g.layouts.decls.append(C_TYPES)
    m = g.fresh("vs_" + name.replace(".", "_"))
    g.value_set_maps[name] = m
    g.value_set_fns[decl] = f"{m}_match"
    g.extern_maps += [f"BPF_ARRAY({m}, struct p4_vs_entry, {size});", f"BPF_ARRAY({m}_n, u32, 1);"]
    g.functions.append("\n".join([
        f"/* value_set {name} */",
        f"static __always_inline int {m}_match(u64 key) {{",
        "    u32 z = 0;", f"    u32 *np = {m}_n.lookup(&z);", "    u32 n = np ? *np : 0;",
        "#pragma clang loop unroll(disable)",
        f"    for (u32 i = 0; i < {size}; i++) {{", "        if (i >= n) break;",
        "        u32 idx = i;", f"        struct p4_vs_entry *e = {m}.lookup(&idx);",
        "        if (!e) break;", "        if ((key & e->m) == e->v) return 1;", "    }",
        "    return 0;", "}"]))


def value_set_of(ks: Any) -> Any:
    """The ValueSetDecl a select keyset names, or None."""
    if isinstance(ks, A.ValueKeyset):
        d = getattr(ks.expr, "decl", None)
        if isinstance(d, A.ValueSetDecl):
            return d
    return None


class ValueSetMirror:
    """Keeps one value set's array and count equal to its `ValueSet`."""

    def __init__(self, prog: LoadedProgram, vs: ValueSet, mapname: str) -> None:
        self.vs = vs
        self.map = prog.table(mapname)
        self.count = prog.table(mapname + "_n")

    def attach(self) -> None:
        self.changed(self.vs)
        self.vs.observers.append(self.changed)

    def detach(self) -> None:
        if self.changed in self.vs.observers:
            self.vs.observers.remove(self.changed)

    def changed(self, vs: ValueSet) -> None:
        """The count goes down first and up last: a packet never reads a half-written cell."""
        self.count[ctypes.c_int(0)] = ctypes.c_uint32(0)
        for i, (value, mask) in enumerate(vs.members):
            cell = self.map.Leaf()
            cell.v, cell.m = value, mask
            self.map[ctypes.c_int(i)] = cell
        self.count[ctypes.c_int(0)] = ctypes.c_uint32(len(vs.members))
