"""Meters and indirect tables as C: a mixin of `blocks.CGen`.

* ``meter`` / ``direct_meter`` instances and their methods (`meters_c` holds the cell
  and its RFC 2698 update);
* a table's direct meter, executed on a hit before the action;
* an indirect table's entry resolved to its profile member, a selector group's member
  picked by the hash of the selector keys (`tables_c` lays out the maps).
"""
from __future__ import annotations

from typing import Any

from softswitch.backends.ebpf import meters_c as MC
from softswitch.backends.ebpf.errors import EbpfUnsupported
from softswitch.backends.ebpf.hashes_c import hash_c
from softswitch.backends.ebpf.layout import Layouts
from softswitch.backends.ebpf.tables_c import REF_GROUP, REF_MEMBER, TableLayout
from softswitch.frontend import ast as A
from softswitch.lowering.names import control_plane_name

IND = "    "


class StatefulGen:
    """Meters and action profiles; the state and helpers it uses are `CGen`'s."""

    arch: Any
    layouts: Layouts
    lowered: Any
    profiles: dict[str, Any]
    instances: dict[Any, tuple[str, str, int, int]]
    externs: dict[str, tuple[str, str, int, int]]
    extern_maps: list[str]
    meters_used: bool
    meter_types: dict[Any, str]

    # implemented by CGen / ExprGen
    def fresh(self, base: str) -> str:
        raise NotImplementedError

    def ex(self, e: A.Expression) -> str:
        raise NotImplementedError

    def lval(self, e: A.Expression) -> str:
        raise NotImplementedError

    def width(self, e: A.Expression) -> int:
        raise NotImplementedError

    def gen_meter(self, d: A.InstantiationDecl, prefix: str, tname: str) -> None:
        """A ``meter`` as a BPF array of `meters_c` cells; a ``direct_meter`` as the cell
        of its last colour (its buckets live with the table that names it)."""
        low = self.lowered.at(prefix, d)
        name = low.name if low is not None else control_plane_name(d, prefix)
        if not self.meters_used:
            self.meters_used = True
            self.layouts.decls.append(MC.C_TYPES)
        args = list(d.args)
        mtype = MC.meter_type_of(args[-1]) if args else ""
        if mtype not in ("packets", "bytes"):
            raise EbpfUnsupported(d, f"{tname} {d.name}: the meter type must be MeterType.packets "
                                     "or MeterType.bytes")
        if tname == "direct_meter":
            mapname = self.fresh("dmc_" + name.replace(".", "_"))
            self.extern_maps.append(f"BPF_ARRAY({mapname}, u32, 1);")
            self.instances[d] = ("direct_meter", mapname, 0, 0)
            self.meter_types[d] = mtype
            return
        size = args[0].value.const_value
        if not isinstance(size, int) or size <= 0:
            raise EbpfUnsupported(d, f"meter {d.name}: size must be a positive constant")
        mapname = self.fresh("mtr_" + name.replace(".", "_"))
        self.extern_maps.append(f"BPF_ARRAY({mapname}, struct p4_meter, {size});")
        self.instances[d] = ("meter", mapname, size, 0)
        self.meter_types[d] = mtype
        self.externs[name] = ("meter", mapname, size, 0)

    def meter_method(self, obj: Any, inst: tuple[str, str, int, int], member: str,
                     args: list[A.Expression]) -> list[str] | None:
        """``m.execute_meter(i, out colour)`` and ``dm.read(out colour)``."""
        kind, mapname, size, _ = inst
        if kind == "meter" and member == "execute_meter":
            mtype = self.meter_types[obj.decl]
            mask = (1 << self.width(args[1])) - 1
            return ["{", f"    u32 i = (u32)({self.ex(args[0])});",
                    f"    struct p4_meter *m = i < {size} ? {mapname}.lookup(&i) : 0;",
                    f"    {self.lval(args[1])} = {MC.execute_c('m', mtype)} & {mask:#x};", "}"]
        if kind == "direct_meter" and member == "read":
            mask = (1 << self.width(args[0])) - 1
            return ["{", "    u32 z = 0;", f"    u32 *c = {mapname}.lookup(&z);",
                    f"    {self.lval(args[0])} = c ? (*c & {mask:#x}) : 0;", "}"]
        return None

    def direct_meter_c(self, decl: A.TableDecl, name: str, t: str) -> list[str]:
        """The hit entry's meter cell executed; its colour kept for ``read``."""
        prop = decl.property(self.arch.tables.direct_meters or "meters")
        d = getattr(getattr(prop, "value", None), "decl", None)
        inst = self.instances.get(d)
        if inst is None or inst[0] != "direct_meter":
            raise EbpfUnsupported(decl, f"table {name}: its meters property must name a "
                                        "direct_meter of the table's control or the top level")
        return [f"struct p4_meter *m = {t}_mtr.lookup(&v->slot);",
                f"u32 color = {MC.execute_c('m', self.meter_types[d])};",
                "u32 zc = 0;", f"u32 *dc = {inst[1]}.lookup(&zc);", "if (dc) *dc = color;"]

    def indirect_c(self, decl: A.TableDecl, name: str, lay: TableLayout) -> list[str]:
        """An indirect table's entry resolved to its member (``v`` then points at the
        member's value, ``act`` is its action, 0 for an empty group): a group's member
        is hash(selector keys) & width mask, modulo the group's size, as the Python target."""
        t = lay.cname
        tables = [t for b in self.lowered.instances() for t in b.tables]
        table = next(t for t in tables if t.name == name)
        assert lay.profile is not None
        prof = self.profiles[lay.profile]
        others = [x for x in tables if x is not table and x.implementation is not None
                  and x.implementation.name == lay.profile]
        if any([a.name for a in x.actions] != [a.name for a in table.actions] for x in others):
            raise EbpfUnsupported(decl, f"table {name}: action profile {prof.name} shared with a "
                                        "table of other actions")
        out = ["u32 act = v->action;", f"if (act == {REF_MEMBER:#x} || act == {REF_GROUP:#x}) {{",
               "    u32 ref = v->ref;"]
        if lay.group_members:
            kind = self.arch.tables.selector_match_kind
            pieces = [(self.ex(k.expr), self.width(k.expr)) for k in decl.keys if k.match_kind == kind]
            mask = (1 << prof.output_width) - 1
            out += [f"    if (act == {REF_GROUP:#x}) {{",
                    f"        struct {t}_group *g = {t}_grp.lookup(&ref);",
                    "        u32 n = g ? g->n : 0;",
                    "        u32 pick = 0;",
                    "        if (n > 1) {"]
            out += [IND * 3 + x for x in hash_c(prof.algorithm or "crc16", pieces, decl, "h")]
            out += [f"            pick = (u32)((h & {mask:#x}ULL) % n);", "        }",
                    f"        if (!g || !n || pick >= {lay.group_members}) act = 0;",
                    "        else ref = g->m[pick];", "    }"]
        out += ["    if (act) {", f"        v = {t}_mem.lookup(&ref);", "        act = v ? v->action : 0;",
                "        if (!v) return hit;", "    }", "}"]
        return out
