"""Match-action tables: entries, match engines per key shape, counters per entry.

Why per-shape engines: an all-exact table is one dict lookup; a table with one
LPM key (plus exact keys) is one dict lookup per distinct prefix length, longest
first; only ternary/range/optional tables need a priority-ordered scan. The
table picks its engine once, from its key kinds, so a lookup never inspects
match kinds at run time.

Priorities follow P4Runtime: a larger number wins. Match values are plain ints.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from softswitch.errors import RuntimeApiError, RuntimeErrorCode

MATCH_KINDS = ("exact", "lpm", "ternary", "range", "optional", "selector")


@dataclass(slots=True, frozen=True)
class Exact:
    value: int


@dataclass(slots=True, frozen=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(slots=True, frozen=True)
class Ternary:
    value: int
    mask: int


@dataclass(slots=True, frozen=True)
class Range:
    low: int
    high: int


@dataclass(slots=True, frozen=True)
class Optional:
    """An optional key: `value` None is a wildcard."""

    value: int | None


MatchValue = Exact | Lpm | Ternary | Range | Optional


class TableObserver(Protocol):
    """A target that keeps its own copy of the entries (the eBPF target's BPF maps)."""

    def entry_changed(self, table: Table, op: str, entry: TableEntry) -> None:
        """`op` is insert, modify, delete, default (the default action changed), counters
        (the entry's direct counter was set) or meter (its direct meter was configured)."""

    def refresh_counters(self, table: Table) -> None:
        """Copy the target's direct-counter values into the entries before a read."""


@dataclass(slots=True, kw_only=True)
class KeyField:
    """One key element of a table: its name (as in P4Info), match kind and width."""

    name: str
    match_kind: str
    width: int


@dataclass(slots=True, kw_only=True)
class ActionSpec:
    """An action a table may run: name, parameter names and widths, compiled body."""

    name: str
    params: list[tuple[str, int]]
    fn: Callable[..., Any] | None = None
    default_only: bool = False
    table_only: bool = False


def find_action(where: str, actions: dict[str, ActionSpec], action: str) -> ActionSpec:
    """The spec of `action` among a table's (or an action profile's) `actions`."""
    spec = actions.get(action)
    if spec is None:
        raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                              f"{where}: action {action!r} is not one of {sorted(actions)}")
    return spec


def check_args(where: str, spec: ActionSpec, args: Sequence[int]) -> tuple[int, ...]:
    """`args` as action data of `spec`: one unsigned value per parameter, each fitting
    its width."""
    if len(args) != len(spec.params):
        raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION_PARAMS,
                              f"{where}: action {spec.name} takes {len(spec.params)} "
                              f"parameters ({', '.join(p for p, _ in spec.params)}), got {len(args)}")
    for (pname, width), a in zip(spec.params, args):
        if not isinstance(a, int) or a < 0 or a >> width:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION_PARAMS,
                                  f"{where}: action {spec.name} parameter {pname} "
                                  f"value {a!r} does not fit bit<{width}>")
    return tuple(args)


@dataclass(slots=True, kw_only=True, eq=False)
class TableEntry:
    """One installed entry. `args` are the action data in parameter order."""

    key: tuple[MatchValue, ...]
    action: str
    args: tuple[int, ...]
    priority: int = 0
    handle: int = 0
    packets: int = 0
    bytes: int = 0
    meter_config: Any = None
    meter_state: Any = None
    is_const: bool = False
    fn: Callable[..., Any] | None = None
    member: int | None = None   # indirect tables: the action profile member ...
    group: int | None = None    # ... or group this entry points at

    def describe(self) -> str:
        keys = ", ".join(_format_match(m) for m in self.key)
        pri = f" priority {self.priority}" if self.priority else ""
        if self.member is not None:
            return f"[{keys}]{pri} -> member {self.member}"
        if self.group is not None:
            return f"[{keys}]{pri} -> group {self.group}"
        args = ", ".join(hex(a) for a in self.args)
        return f"[{keys}]{pri} -> {self.action}({args})"


def _format_match(m: MatchValue) -> str:
    if isinstance(m, Exact):
        return hex(m.value)
    if isinstance(m, Lpm):
        return f"{m.value:#x}/{m.prefix_len}"
    if isinstance(m, Ternary):
        return f"{m.value:#x}&&&{m.mask:#x}"
    if isinstance(m, Range):
        return f"{m.low:#x}..{m.high:#x}"
    return "_" if m.value is None else hex(m.value)


class Table:
    """A P4 table at run time. Lookups return the matching `TableEntry` or None."""

    def __init__(self, *, name: str, keys: Sequence[KeyField], actions: Sequence[ActionSpec],
                 size: int = 1024, default_action: str = "NoAction",
                 default_args: tuple[int, ...] = (), default_const: bool = False,
                 has_direct_counter: bool = False, has_direct_meter: bool = False,
                 entries_const: bool = False) -> None:
        self.name = name
        self.keys = list(keys)
        self.actions = {a.name: a for a in actions}
        self.size = size
        self.default_const = default_const
        self.entries_const = entries_const
        self.has_direct_counter = has_direct_counter
        self.has_direct_meter = has_direct_meter
        self.profile: Any = None  # ActionProfile of an indirect table
        kinds = [k.match_kind for k in self.keys]
        for k in self.keys:
            if k.match_kind not in MATCH_KINDS:
                raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED,
                                      f"table {name}: key {k.name} has match kind {k.match_kind}")
        self.needs_priority = any(k in ("ternary", "range", "optional") for k in kinds)
        self.lpm_index = kinds.index("lpm") if kinds.count("lpm") == 1 else -1
        if kinds.count("lpm") > 1:
            self.needs_priority = True
        self._handles = itertools.count(1)
        self._by_key: dict[tuple, TableEntry] = {}
        self._by_handle: dict[int, TableEntry] = {}
        self._index: dict[tuple, TableEntry] = {}
        self._lpm: dict[int, dict[tuple, TableEntry]] = {}
        self._lpm_lengths: list[int] = []
        self._scan: list[tuple[TableEntry, tuple]] = []
        self.default = TableEntry(key=(), action=default_action, args=tuple(default_args))
        # a kernel target mirrors the entries: told of each change, asked to refresh counters
        self.observers: list[TableObserver] = []
        self.lookup: Callable[[tuple[int, ...]], TableEntry | None] = self._pick_engine()

    # ----------------------------------------------------------------- engines
    def _pick_engine(self) -> Callable[[tuple[int, ...]], TableEntry | None]:
        if not self.keys:
            return lambda key: None
        if self.needs_priority:
            return self._lookup_scan
        if self.lpm_index >= 0:
            return self._lookup_lpm
        return self._by_key.get

    def _lookup_lpm(self, key: tuple[int, ...]) -> TableEntry | None:
        i = self.lpm_index
        width = self.keys[i].width
        v = key[i]
        for plen in self._lpm_lengths:
            masked = v & (((1 << plen) - 1) << (width - plen))
            e = self._lpm[plen].get(key[:i] + (masked,) + key[i + 1:])
            if e is not None:
                return e
        return None

    def _lookup_scan(self, key: tuple[int, ...]) -> TableEntry | None:
        for e, checks in self._scan:
            for (mask, value, low, high), v in zip(checks, key):
                if low < 0:
                    if v & mask != value:
                        break
                elif not low <= v <= high:
                    break
            else:
                return e
        return None

    def _scan_checks(self, e: TableEntry) -> tuple[tuple[int, int, int, int], ...]:
        """Each key field as (mask, value, low, high); low < 0 means a mask test."""
        out = []
        for kf, m in zip(self.keys, e.key):
            full = (1 << kf.width) - 1
            if isinstance(m, Exact):
                out.append((full, m.value, -1, 0))
            elif isinstance(m, Ternary):
                out.append((m.mask, m.value, -1, 0))
            elif isinstance(m, Lpm):
                mask = ((1 << m.prefix_len) - 1) << (kf.width - m.prefix_len)
                out.append((mask, m.value, -1, 0))
            elif isinstance(m, Range):
                out.append((0, 0, m.low, m.high))
            else:
                out.append((0, 0, -1, 0) if m.value is None else (full, m.value, -1, 0))
        return tuple(out)

    # ------------------------------------------------------------- validation
    def _check_key(self, key: Sequence[MatchValue | int]) -> tuple[MatchValue, ...]:
        if len(key) != len(self.keys):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY,
                                  f"table {self.name}: key has {len(key)} fields, "
                                  f"expected {len(self.keys)} ({', '.join(k.name for k in self.keys)})")
        out: list[MatchValue] = []
        for kf, m in zip(self.keys, key):
            out.append(_canonical(self.name, kf, m))
        return tuple(out)

    def _check_action(self, action: str, args: Sequence[int], *, for_default: bool) -> tuple[int, ...]:
        spec = find_action(f"table {self.name}", self.actions, action)
        if for_default and spec.table_only:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: action {action} is @tableonly, not a default action")
        if not for_default and spec.default_only:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: action {action} is @defaultonly")
        return check_args(f"table {self.name}", spec, args)

    def _index_key(self, key: tuple[MatchValue, ...]) -> tuple:
        return tuple((type(m).__name__,) + tuple(getattr(m, f) for f in m.__slots__) for m in key)

    # ---------------------------------------------------------------- updates
    def insert(self, key: Sequence[MatchValue | int], action: str, args: Sequence[int] = (),
               priority: int = 0, *, is_const: bool = False) -> TableEntry:
        """Add an entry; refuses duplicates, bad keys/actions and a full table."""
        if self.profile is not None:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: indirect table (action profile "
                                  f"{self.profile.name}): entries name a member or a group")
        ckey = self._check_key(key)
        cargs = self._check_action(action, args, for_default=False)
        e = self._add_entry(ckey, action, cargs, priority, is_const)
        e.fn = self.actions[action].fn
        self._notify("insert", e)
        return e

    def _add_entry(self, ckey: tuple[MatchValue, ...], action: str, cargs: tuple[int, ...],
                   priority: int, is_const: bool) -> TableEntry:
        if self.needs_priority:
            if priority <= 0:
                raise RuntimeApiError(RuntimeErrorCode.BAD_PRIORITY,
                                      f"table {self.name}: ternary/range/optional entries need a "
                                      f"priority > 0, got {priority}")
        elif priority:
            raise RuntimeApiError(RuntimeErrorCode.BAD_PRIORITY,
                                  f"table {self.name}: priority {priority} given for a table "
                                  f"without ternary/range/optional keys")
        ik = self._index_key(ckey) + ((priority,) if self.needs_priority else ())
        if ik in self._index:
            raise RuntimeApiError(RuntimeErrorCode.DUPLICATE_ENTRY,
                                  f"table {self.name}: an entry with key "
                                  f"{TableEntry(key=ckey, action='', args=()).describe()} exists")
        if len(self._index) >= self.size:
            raise RuntimeApiError(RuntimeErrorCode.TABLE_FULL,
                                  f"table {self.name}: full ({self.size} entries)")
        e = TableEntry(key=ckey, action=action, args=cargs, priority=priority,
                       handle=next(self._handles), is_const=is_const)
        self._index[ik] = e
        self._by_handle[e.handle] = e
        self._add_to_engine(e)
        return e

    def insert_indirect(self, key: Sequence[MatchValue | int], *, member: int | None = None,
                        group: int | None = None, priority: int = 0) -> TableEntry:
        """Add an entry of an indirect table pointing at an action profile member or group."""
        prof = self.profile
        if prof is None:
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: not an indirect table (no action profile)")
        if (member is None) == (group is None):
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: give exactly one of member or group")
        if member is not None and member not in prof.members:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                                  f"table {self.name}: action profile {prof.name} has no member {member}")
        if group is not None and group not in prof.groups:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                                  f"table {self.name}: action profile {prof.name} has no group {group}")
        e = self._add_entry(self._check_key(key), "", (), priority, False)
        e.member, e.group = member, group
        self._notify("insert", e)
        return e

    def modify_indirect(self, key: Sequence[MatchValue | int], *, member: int | None = None,
                        group: int | None = None, priority: int = 0) -> TableEntry:
        e = self.find(key, priority)
        prof = self.profile
        if prof is None or (member is None) == (group is None):
            raise RuntimeApiError(RuntimeErrorCode.BAD_ACTION,
                                  f"table {self.name}: give exactly one of member or group of its profile")
        if (member is not None and member not in prof.members) or (group is not None and group not in prof.groups):
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                                  f"table {self.name}: action profile {prof.name} has no "
                                  + (f"member {member}" if member is not None else f"group {group}"))
        e.member, e.group = member, group
        self._notify("modify", e)
        return e

    def refers_to(self, *, member: int | None = None, group: int | None = None) -> bool:
        return any((member is not None and e.member == member) or (group is not None and e.group == group)
                   for e in self._index.values())

    def find(self, key: Sequence[MatchValue | int], priority: int = 0) -> TableEntry:
        self._refresh()
        ckey = self._check_key(key)
        ik = self._index_key(ckey) + ((priority,) if self.needs_priority else ())
        e = self._index.get(ik)
        if e is None:
            raise RuntimeApiError(RuntimeErrorCode.NOT_FOUND,
                                  f"table {self.name}: no entry with key "
                                  f"{TableEntry(key=ckey, action='', args=()).describe()}"
                                  + (f" priority {priority}" if priority else ""))
        return e

    def modify(self, key: Sequence[MatchValue | int], action: str, args: Sequence[int] = (),
               priority: int = 0) -> TableEntry:
        """Change the action of an existing entry (counters are kept)."""
        e = self.find(key, priority)
        cargs = self._check_action(action, args, for_default=False)
        if e.is_const:
            raise RuntimeApiError(RuntimeErrorCode.CONST_TABLE, f"table {self.name}: entry is const")
        e.action, e.args, e.fn = action, cargs, self.actions[action].fn
        self._notify("modify", e)
        return e

    def delete(self, key: Sequence[MatchValue | int], priority: int = 0) -> TableEntry:
        e = self.find(key, priority)
        if e.is_const:
            raise RuntimeApiError(RuntimeErrorCode.CONST_TABLE, f"table {self.name}: entry is const")
        ik = self._index_key(e.key) + ((priority,) if self.needs_priority else ())
        del self._index[ik]
        del self._by_handle[e.handle]
        self._remove_from_engine(e)
        self._notify("delete", e)
        return e

    def clear(self) -> None:
        for e in list(self._index.values()):
            if not e.is_const:
                self.delete(e.key, e.priority)

    def set_default(self, action: str, args: Sequence[int] = ()) -> None:
        if self.default_const:
            raise RuntimeApiError(RuntimeErrorCode.CONST_TABLE,
                                  f"table {self.name}: default action is const")
        cargs = self._check_action(action, args, for_default=True)
        self.default.action, self.default.args = action, cargs
        self.default.fn = self.actions[action].fn
        self._notify("default", self.default)

    def entries(self) -> list[TableEntry]:
        self._refresh()
        return list(self._index.values())

    def set_entry_counters(self, e: TableEntry, packets: int, nbytes: int) -> None:
        """Set an entry's direct counter; a kernel target's observer hears op ``counters``."""
        e.packets, e.bytes = packets, nbytes
        self._notify("counters", e)

    def set_entry_meter(self, e: TableEntry, config: Any) -> None:
        """Configure an entry's direct meter (None: unconfigured, GREEN); its buckets
        start again. A kernel target's observer hears op ``meter``."""
        e.meter_config, e.meter_state = config, None
        self._notify("meter", e)

    def _notify(self, op: str, e: TableEntry) -> None:
        for o in self.observers:
            o.entry_changed(self, op, e)

    def _refresh(self) -> None:
        for o in self.observers:
            o.refresh_counters(self)

    def bind(self) -> None:
        """Refresh each entry's cached action function after actions got compiled."""
        for e in self._index.values():
            if e.member is None and e.group is None:
                e.fn = self.actions[e.action].fn
        self.default.fn = self.actions[self.default.action].fn if self.default.action in self.actions else None

    # ------------------------------------------------------------ engine data
    def _add_to_engine(self, e: TableEntry) -> None:
        if self.needs_priority:
            self._scan.append((e, self._scan_checks(e)))
            # stable sort: among equal priorities the earlier entry wins
            self._scan.sort(key=lambda x: -x[0].priority)
        elif self.lpm_index >= 0:
            plain = self._plain_key(e)
            plen = e.key[self.lpm_index].prefix_len  # type: ignore[union-attr]
            bucket = self._lpm.setdefault(plen, {})
            bucket[plain] = e
            self._lpm_lengths = sorted(self._lpm, reverse=True)
        else:
            self._by_key[self._plain_key(e)] = e

    def _remove_from_engine(self, e: TableEntry) -> None:
        if self.needs_priority:
            self._scan = [x for x in self._scan if x[0] is not e]
        elif self.lpm_index >= 0:
            plen = e.key[self.lpm_index].prefix_len  # type: ignore[union-attr]
            bucket = self._lpm[plen]
            del bucket[self._plain_key(e)]
            if not bucket:
                del self._lpm[plen]
                self._lpm_lengths = sorted(self._lpm, reverse=True)
        else:
            del self._by_key[self._plain_key(e)]

    @staticmethod
    def _plain_key(e: TableEntry) -> tuple[int, ...]:
        return tuple(m.value for m in e.key)  # type: ignore[union-attr, misc]


def _canonical(table: str, kf: KeyField, m: MatchValue | int) -> MatchValue:
    """Check one match value against its key field and put it in canonical form."""
    w = kf.width
    top = 1 << w
    where = f"table {table}: key {kf.name} ({kf.match_kind}, bit<{w}>)"
    kind = kf.match_kind
    if isinstance(m, int):
        m = Exact(m)
    if kind == "exact" or kind == "selector":
        if not isinstance(m, Exact):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: got {m}")
        if not 0 <= m.value < top:
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: value {m.value:#x} too wide")
        return m
    if kind == "lpm":
        if isinstance(m, Exact):
            m = Lpm(m.value, w)
        if not isinstance(m, Lpm):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: got {m}")
        if not 0 <= m.prefix_len <= w or not 0 <= m.value < top:
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY,
                                  f"{where}: bad prefix {m.value:#x}/{m.prefix_len}")
        mask = ((1 << m.prefix_len) - 1) << (w - m.prefix_len)
        if m.value & ~mask:
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY,
                                  f"{where}: value {m.value:#x} has bits beyond prefix length {m.prefix_len}")
        return m
    if kind == "ternary":
        if isinstance(m, Exact):
            m = Ternary(m.value, top - 1)
        if not isinstance(m, Ternary):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: got {m}")
        if not (0 <= m.value < top and 0 <= m.mask < top):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: {m} too wide")
        if m.value & ~m.mask:
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY,
                                  f"{where}: value {m.value:#x} has bits outside mask {m.mask:#x}")
        return m
    if kind == "range":
        if isinstance(m, Exact):
            m = Range(m.value, m.value)
        if not isinstance(m, Range):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: got {m}")
        if not (0 <= m.low <= m.high < top):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: bad range {m.low:#x}..{m.high:#x}")
        return m
    if kind == "optional":
        if isinstance(m, Exact):
            m = Optional(m.value)
        if not isinstance(m, Optional):
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: got {m}")
        if m.value is not None and not 0 <= m.value < top:
            raise RuntimeApiError(RuntimeErrorCode.BAD_MATCH_KEY, f"{where}: value {m.value:#x} too wide")
        return m
    raise RuntimeApiError(RuntimeErrorCode.UNSUPPORTED, f"{where}: match kind not supported")
