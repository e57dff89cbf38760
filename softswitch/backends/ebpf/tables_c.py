"""Tables as BPF maps: key and value layouts, map declarations, the apply function.

Why one layout object: the generated C builds each lookup key and the runtime's map
writer builds each entry's key from the same `TableLayout`, byte for byte.

* all-exact keys: a hash map keyed by the key fields, each big-endian in whole bytes;
* one LPM key (after any exact ones): an LPM trie; the LPM field is left-aligned in
  its bytes and the prefix length counts the exact fields' bits first;
* ternary, range or optional keys (or several LPM keys): an array of entries in
  priority order (the largest first, earlier entries first among equals, as the
  Python target's scan), each key field as (value, mask) or (low, high), scanned by
  a bounded loop up to the number of entries in use; the writer rewrites the order
  on each change;
* the value: the action id, the entry's slot (its direct-counter and direct-meter
  cells) and the action data as a union of one struct per action; a one-cell array
  holds the default;
* an indirect table (``implementation``): an entry's value names a member or a group
  (action REF_MEMBER / REF_GROUP, ``ref`` its slot); the members are values in
  ``tbl_X_mem``, a selector's groups lists of member slots in ``tbl_X_grp``, and the
  apply function picks a group's member by the hash of the selector keys, as
  `softswitch.action_profiles.ActionProfile.pick` does.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.layout import cname, ctype
from softswitch.lowering import LoweredTable
from softswitch.tables import Exact, Lpm, Optional, Range, TableEntry, Ternary

MAX_SCAN_ENTRIES = 1024
MAX_GROUP_MEMBERS = 256     # members of one selector group on the eBPF target
# the value's action of an indirect entry: it names a member or a group (its `ref`)
REF_MEMBER = 0xFFFFFFF0
REF_GROUP = 0xFFFFFFF1


@dataclass(slots=True, kw_only=True)
class KeySegment:
    index: int          # key field position in the table
    width: int
    nbytes: int
    offset: int         # byte offset in the key data
    kind: str           # exact | lpm | ternary | range | optional


@dataclass(slots=True, kw_only=True)
class TableLayout:
    """Where a table's entries live in the kernel and how they are laid out."""

    name: str                       # control-plane name (P4Info)
    cname: str                      # C identifier stem: maps tbl_X, tbl_X_def, tbl_X_ctr
    map_kind: str                   # hash | lpm | scan
    segments: list[KeySegment]
    key_bytes: int
    size: int
    action_ids: dict[str, int]      # control-plane action name -> id in the value
    action_params: dict[str, list[tuple[str, int]]]
    has_counters: bool
    has_meter: bool = False         # a direct meter: one meters_c cell per slot (tbl_X_mtr)
    # an indirect table: its profile's members (tbl_X_mem) and selector groups (tbl_X_grp)
    profile: str | None = None
    profile_size: int = 0           # members (and groups) the maps hold
    group_members: int = 0          # members a group holds (0: an action_profile, no groups)
    decl_loc: Any = None
    c_decls: list[str] = field(default_factory=list)

    # ------------------------------------------------------------ the writer
    def key_data(self, entry_key: tuple[Any, ...]) -> tuple[bytes, int]:
        """(key bytes, prefix length in bits for LPM tries) of an entry's match values."""
        data = bytearray(self.key_bytes)
        plen = 0
        for seg in self.segments:
            m = entry_key[seg.index]
            if isinstance(m, Lpm):
                value = m.value << (8 * seg.nbytes - seg.width)
                plen += m.prefix_len
            elif isinstance(m, Exact):
                value = m.value if seg.kind == "exact" else m.value << (8 * seg.nbytes - seg.width)
                plen += 8 * seg.nbytes if seg.kind == "exact" else seg.width
            else:
                raise TypeError(f"table {self.name}: match {m!r} in a {self.map_kind} table")
            data[seg.offset:seg.offset + seg.nbytes] = value.to_bytes(seg.nbytes, "big")
        return bytes(data), plen

    def scan_cells(self, entry_key: tuple[Any, ...]) -> tuple[list[int], list[int]]:
        """(a, b) per key field of a scan table: (value, mask), or (low, high) for ranges."""
        a, b = [], []
        for seg in self.segments:
            m = entry_key[seg.index]
            full = (1 << seg.width) - 1
            if isinstance(m, Exact):
                a.append(m.value)
                b.append(full)
            elif isinstance(m, Lpm):
                a.append(m.value)
                b.append(((1 << m.prefix_len) - 1) << (seg.width - m.prefix_len))
            elif isinstance(m, Ternary):
                a.append(m.value)
                b.append(m.mask)
            elif isinstance(m, Range):
                a.append(m.low)
                b.append(m.high)
            elif isinstance(m, Optional):
                a.append(m.value or 0)
                b.append(0 if m.value is None else full)
            else:
                raise TypeError(f"table {self.name}: match {m!r}")
        return a, b


def layout_table(table: LoweredTable, cstem: str) -> TableLayout:
    """The layout of `table` (the lowered table: names, keys, actions as in P4Info)."""
    decl = table.decl
    kinds = [k.match_kind for k in table.keys]
    if any(k not in ("exact", "lpm", "ternary", "range", "optional") for k in kinds):
        bad = next(k for k in table.keys if k.match_kind not in ("exact", "lpm"))
        raise EbpfUnsupported(decl, f"table {table.name}: {bad.match_kind} key {bad.name}")
    scan = table.needs_priority
    if scan and table.size > MAX_SCAN_ENTRIES:
        raise EbpfUnsupported(decl, f"table {table.name}: {table.size} entries of ternary/range/"
                                    f"optional keys (the kernel scan takes at most {MAX_SCAN_ENTRIES})")
    prof = table.implementation
    selector = prof is not None and prof.type_name == "action_selector"
    prof_size = 0
    if prof is not None:
        prof_size = max(prof.const_arg(1 if selector else 0) or 0, 1)
        width = prof.const_arg(2) or 0 if selector else 0
        if selector and not 0 < width <= 64:
            raise EbpfUnsupported(decl, f"table {table.name}: action_selector {prof.name} with a "
                                        f"{width}-bit hash (1 to 64 bits)")
    order = list(range(len(kinds))) if scan else (
        [i for i, k in enumerate(kinds) if k == "exact"] + [i for i, k in enumerate(kinds) if k == "lpm"])
    segs = []
    off = 0
    for i in order:
        kf = table.keys[i]
        width = kf.width
        if width > (64 if scan else 128):
            raise EbpfUnsupported(decl, f"table {table.name}: key {kf.name} wider than "
                                        f"{64 if scan else 128} bits")
        nb = (width + 7) // 8
        segs.append(KeySegment(index=i, width=width, nbytes=nb, offset=off, kind=kf.match_kind))
        off += nb
    # the actions a table entry or its default may name: the listed ones, then the default
    params = {a.name: a.action.data_params for a in table.actions}
    if table.default is not None:
        params.setdefault(table.default.name, table.default.action.data_params)
    for a, ps in params.items():
        for p, w in ps:
            if w > 64:
                raise EbpfUnsupported(decl, f"table {table.name}: action {a} parameter {p} of "
                                            f"{w} bits (action data over 64 bits: not yet)")
    return TableLayout(
        name=table.name, cname=cstem,
        map_kind="scan" if scan else "lpm" if "lpm" in kinds else "hash",
        segments=segs, key_bytes=max(off, 1), size=max(table.size, 1),
        action_ids={a: i + 1 for i, a in enumerate(params)},
        action_params=params,
        has_counters=table.direct_counter is not None, has_meter=table.direct_meter is not None,
        profile=None if prof is None else prof.name,
        profile_size=prof_size,
        group_members=min(prof_size, MAX_GROUP_MEMBERS) if selector else 0,
        decl_loc=getattr(decl, "loc", None))


def _value_struct(lay: TableLayout) -> list[str]:
    lines = [f"struct {lay.cname}_value {{", "    u32 action;", "    u32 slot;"]
    if lay.profile is not None:
        lines.append("    u32 ref;   /* the member's or group's slot (action REF_MEMBER/REF_GROUP) */")
    lines.append("    union {")
    for a, params in lay.action_params.items():
        aid = lay.action_ids[a]
        if params:
            lines.append("        struct {")
            for p, w in params:
                lines.append(f"            {ctype(w)} {cname(p)};")
            lines.append(f"        }} a{aid};  /* {a} */")
    lines += ["        u8 none;", "    } u;", "};"]
    return lines


def _scan_c_decls(lay: TableLayout) -> list[str]:
    t = lay.cname
    n = max(len(lay.segments), 1)
    lines = _value_struct(lay)
    lines += [f"struct {t}_entry {{", f"    u64 a[{n}];", f"    u64 b[{n}];",
              f"    struct {t}_value v;", "};",
              f"BPF_ARRAY({t}, struct {t}_entry, {lay.size});",
              f"BPF_ARRAY({t}_n, u32, 1);",
              f"BPF_ARRAY({t}_def, struct {t}_value, 1);"]
    return lines + _direct_decls(lay)


def _direct_decls(lay: TableLayout) -> list[str]:
    """Per-slot arrays of the direct counters and the direct meter."""
    t = lay.cname
    out = []
    if lay.has_counters:
        out.append(f"BPF_ARRAY({t}_ctr, struct counter_cell, {lay.size});")
    if lay.has_meter:
        out.append(f"BPF_ARRAY({t}_mtr, struct p4_meter, {lay.size});")
    if lay.profile is not None:
        out.append(f"BPF_ARRAY({t}_mem, struct {t}_value, {lay.profile_size});")
    if lay.group_members:
        out += [f"struct {t}_group {{ u32 n; u32 m[{lay.group_members}]; }};",
                f"BPF_ARRAY({t}_grp, struct {t}_group, {lay.profile_size});"]
    return out


def scan_lookup_c(lay: TableLayout, key_exprs: list[str]) -> list[str]:
    """C statements setting ``v`` to the first matching entry's value (or 0)."""
    t = lay.cname
    out = [f"u64 key{i} = {key_exprs[seg.index]};" for i, seg in enumerate(lay.segments)]
    conds = []
    for i, seg in enumerate(lay.segments):
        if seg.kind == "range":
            conds.append(f"key{i} >= e->a[{i}] && key{i} <= e->b[{i}]")
        else:
            conds.append(f"(key{i} & e->b[{i}]) == e->a[{i}]")
    out += [f"struct {t}_value *v = 0;", "u32 z = 0;", f"u32 *np = {t}_n.lookup(&z);",
            "u32 n = np ? *np : 0;", "#pragma clang loop unroll(disable)",
            f"for (u32 i = 0; i < {lay.size}; i++) {{", "    if (i >= n) break;",
            # the key's own variable: with &i the verifier loses i's value and so the bound
            "    u32 idx = i;",
            f"    struct {t}_entry *e = {t}.lookup(&idx);", "    if (!e) break;",
            f"    if ({' && '.join(conds) or '1'}) {{", "        v = &e->v;", "        break;", "    }", "}"]
    return out


def table_c_decls(lay: TableLayout) -> list[str]:
    """The key/value structs and the maps of one table."""
    t = lay.cname
    if lay.map_kind == "scan":
        return _scan_c_decls(lay)
    lines = [f"struct {t}_key {{"]
    if lay.map_kind == "lpm":
        lines.append("    u32 prefixlen;")
    lines += [f"    u8 k[{lay.key_bytes}];", "};"]
    lines += _value_struct(lay)
    if lay.map_kind == "lpm":
        lines.append(f"BPF_LPM_TRIE({t}, struct {t}_key, struct {t}_value, {lay.size});")
    else:
        lines.append(f"BPF_HASH({t}, struct {t}_key, struct {t}_value, {lay.size});")
    lines.append(f"BPF_ARRAY({t}_def, struct {t}_value, 1);")
    return lines + _direct_decls(lay)


def key_build_c(lay: TableLayout, key_exprs: list[str]) -> list[str]:
    """C statements filling ``k`` (the lookup key) from the key expressions."""
    out = []
    plen = 0
    for seg in lay.segments:
        val = f"(({'u128' if seg.width > 64 else 'u64'})({key_exprs[seg.index]}))"
        if seg.kind == "lpm" and seg.width % 8:
            val = f"({val} << {8 * seg.nbytes - seg.width})"
        for j in range(seg.nbytes):
            shift = 8 * (seg.nbytes - 1 - j)
            out.append(f"k.k[{seg.offset + j}] = (u8)({val} >> {shift});" if shift
                       else f"k.k[{seg.offset + j}] = (u8){val};")
        plen += 8 * seg.nbytes if seg.kind == "exact" else seg.width
    if lay.map_kind == "lpm":
        out.insert(0, f"k.prefixlen = {plen};")
    return out


def value_fields(lay: TableLayout, action: str) -> list[tuple[str, str]]:
    """(param name, C access path inside the value) of an action's data."""
    aid = lay.action_ids[action]
    return [(p, f"u.a{aid}.{cname(p)}") for p, _ in lay.action_params[action]]


def describe(entry: TableEntry) -> str:
    return entry.describe()
