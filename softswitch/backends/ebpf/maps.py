"""The runtime's side of the kernel tables: mirror every entry change into BPF maps.

The control-plane state stays in the shared `softswitch.tables.Table` objects (so the
runtime API, the STF runner and the P4Runtime server validate and answer exactly as on
the Python target); a `TableMirror` is each table's observer and writes the change into
the table's maps. Each entry gets a slot, its direct-counter cell; counters are read
back from the kernel into the entries before any read; a direct meter's cell is
written when the entry is made and when its meter is configured (op ``meter``).
"""
from __future__ import annotations

import ctypes
from typing import Any

from softswitch.backends.ebpf.errors import EbpfKernelError
from softswitch.backends.ebpf.kernel import LoadedProgram
from softswitch.backends.ebpf.layout import cname
from softswitch.backends.ebpf.meters_c import write_cell
from softswitch.backends.ebpf.profiles import ProfileMirror
from softswitch.backends.ebpf.tables_c import REF_GROUP, REF_MEMBER, TableLayout
from softswitch.errors import RuntimeApiError, RuntimeErrorCode
from softswitch.tables import Table, TableEntry


class TableMirror:
    """Keeps one table's BPF maps equal to its `Table` object."""

    def __init__(self, prog: LoadedProgram, table: Table, layout: TableLayout) -> None:
        self.table = table
        self.layout = layout
        self.map = prog.table(layout.cname)
        self.count = prog.table(layout.cname + "_n") if layout.map_kind == "scan" else None
        self.default_map = prog.table(layout.cname + "_def")
        self.counters = prog.table(layout.cname + "_ctr") if layout.has_counters else None
        self.meters = prog.table(layout.cname + "_mtr") if layout.has_meter else None
        self.slots: dict[int, int] = {}           # entry handle -> slot
        # an indirect table: its profile's members and groups in the table's own maps
        self.profile = None if layout.profile is None or table.profile is None else \
            ProfileMirror(prog, layout, table.profile, self._fill_action)
        self.free = list(range(layout.size - 1, -1, -1))

    def sync_all(self) -> None:
        """Write the default action and every entry (const entries and those written before)."""
        if self.profile is not None:
            self.profile.attach()
        self._write_default(self.table.default)
        for e in self.table.entries():
            self._write(e, new=True)
        self._rewrite_scan()

    # ------------------------------------------------------------- observer
    def entry_changed(self, table: Table, op: str, entry: TableEntry) -> None:
        try:
            if op == "default":
                self._write_default(entry)
            elif op == "insert":
                self._write(entry, new=True)
            elif op == "modify":
                self._write(entry, new=False)
            elif op == "delete":
                self._delete(entry)
            elif op == "meter":
                self._write_meter(entry)
            elif op == "counters":
                self._write_counters(entry)
            if op in ("insert", "modify", "delete"):
                self._rewrite_scan()
        except OSError as exc:  # bcc raises KeyError/Exception subclasses with the errno text
            raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED,
                                  f"table {table.name}: kernel map update failed: {exc}") from exc

    def refresh_counters(self, table: Table) -> None:
        if self.counters is None:
            return
        by_handle = {e.handle: e for e in table._index.values()}
        for handle, slot in self.slots.items():
            e = by_handle.get(handle)
            if e is not None:
                cell = self.counters[ctypes.c_int(slot)]
                e.packets, e.bytes = int(cell.packets), int(cell.bytes)

    # ---------------------------------------------------------------- writes
    def detach(self) -> None:
        """Stop mirroring the table's profile (the table's observer is removed by its owner)."""
        if self.profile is not None:
            self.profile.detach()

    def _value(self, entry: TableEntry, slot: int) -> Any:
        leaf = self.map.Leaf() if self.count is None else self.default_map.Leaf()
        leaf.slot = slot
        if entry.member is not None or entry.group is not None:
            if self.profile is None:
                raise EbpfKernelError(f"table {self.layout.name}: an indirect entry in a table "
                                      "without an action profile")
            leaf.action = REF_MEMBER if entry.member is not None else REF_GROUP
            leaf.ref = self.profile.slot_of(member=entry.member, group=entry.group)
            return leaf
        self._fill_action(leaf, entry.action, entry.args)
        return leaf

    def _fill_action(self, leaf: Any, action: str, args: tuple[int, ...]) -> None:
        """An action and its data into a table value (an entry's or a profile member's)."""
        lay = self.layout
        aid = lay.action_ids.get(action)
        if aid is None:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {lay.name}: action {action} is not one of the table's")
        leaf.action = aid
        params = lay.action_params[action]
        if params:
            data = getattr(leaf.u, f"a{aid}")
            for (pname, _), value in zip(params, args):
                setattr(data, cname(pname), value)

    def _key(self, entry: TableEntry) -> Any:
        data, plen = self.layout.key_data(entry.key)
        key = self.map.Key()
        if self.layout.map_kind == "lpm":
            key.prefixlen = plen
        ctypes.memmove(ctypes.addressof(key.k), data, len(data))
        return key

    def _write(self, entry: TableEntry, *, new: bool) -> None:
        slot = self.slots.get(entry.handle)
        if slot is None:
            if not self.free:
                raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL, f"table {self.layout.name}: no slot left")
            slot = self.free.pop()
            self.slots[entry.handle] = slot
            self._write_counters(entry)
            self._write_meter(entry)
        if self.count is None:
            self.map[self._key(entry)] = self._value(entry, slot)

    def _rewrite_scan(self) -> None:
        """A scan table's array in match order: largest priority first, then oldest.
        The count goes down first and up last, so a packet never reads a half-written cell
        beyond the count (it may see the old order for an instant)."""
        if self.count is None:
            return
        entries = sorted(self.table._index.values(), key=lambda e: (-e.priority, e.handle))
        self.count[ctypes.c_int(0)] = ctypes.c_uint32(0)
        for i, e in enumerate(entries):
            cell = self.map.Leaf()
            a, b = self.layout.scan_cells(e.key)
            for j, (x, y) in enumerate(zip(a, b)):
                cell.a[j], cell.b[j] = x, y
            value = self._value(e, self.slots[e.handle])   # same layout, another ctypes class
            ctypes.memmove(ctypes.addressof(cell.v), ctypes.addressof(value), ctypes.sizeof(value))
            self.map[ctypes.c_int(i)] = cell
        self.count[ctypes.c_int(0)] = ctypes.c_uint32(len(entries))

    def _write_counters(self, entry: TableEntry) -> None:
        """The entry's direct counter cell, from the entry's values."""
        slot = self.slots.get(entry.handle)
        if self.counters is not None and slot is not None:
            cell = self.counters.Leaf()
            cell.packets, cell.bytes = entry.packets, entry.bytes
            self.counters[ctypes.c_int(slot)] = cell

    def _write_meter(self, entry: TableEntry) -> None:
        """The entry's direct meter cell: its configuration, buckets to be refilled."""
        slot = self.slots.get(entry.handle)
        if self.meters is not None and slot is not None:
            write_cell(self.meters, slot, entry.meter_config)

    def _write_default(self, entry: TableEntry) -> None:
        self.default_map[ctypes.c_int(0)] = self._value(entry, 0)

    def _delete(self, entry: TableEntry) -> None:
        slot = self.slots.pop(entry.handle, None)
        if self.count is None:
            try:
                del self.map[self._key(entry)]
            except KeyError:
                pass
        if slot is not None:
            if self.counters is not None:
                self.counters[ctypes.c_int(slot)] = self.counters.Leaf()
            if self.meters is not None:
                write_cell(self.meters, slot, None)
            self.free.append(slot)
