"""Match engines (exact, lpm, ternary, range, optional), priorities and table errors."""
from __future__ import annotations

import pytest

from softswitch.errors import RuntimeApiError
from softswitch.errors import RuntimeErrorCode as C
from softswitch.tables import ActionSpec, Exact, KeyField, Lpm, Optional, Range, Table, Ternary


def table(*kinds: tuple[str, int], size: int = 16) -> Table:
    return Table(name="t", keys=[KeyField(name=f"k{i}", match_kind=k, width=w) for i, (k, w) in enumerate(kinds)],
                 actions=[ActionSpec(name="fwd", params=[("port", 9)]), ActionSpec(name="NoAction", params=[])],
                 size=size)


def code_of(fn) -> C:
    with pytest.raises(RuntimeApiError) as info:
        fn()
    return info.value.code


def test_exact():
    t = table(("exact", 16), ("exact", 8))
    t.insert([Exact(0x800), Exact(6)], "fwd", [3])
    assert t.lookup((0x800, 6)).args == (3,)
    assert t.lookup((0x800, 7)) is None


def test_lpm_longest_prefix_wins_and_delete():
    t = table(("lpm", 32))
    t.insert([Lpm(0x0A000000, 8)], "fwd", [1])
    t.insert([Lpm(0x0A010000, 16)], "fwd", [2])
    t.insert([Lpm(0, 0)], "fwd", [9])
    assert t.lookup((0x0A010203,)).args == (2,)
    assert t.lookup((0x0A020203,)).args == (1,)
    assert t.lookup((0x0B000000,)).args == (9,)
    t.delete([Lpm(0x0A010000, 16)])
    assert t.lookup((0x0A010203,)).args == (1,)


def test_ternary_range_optional_priority():
    t = table(("ternary", 8), ("range", 8), ("optional", 8))
    t.insert([Ternary(0x10, 0xF0), Range(1, 5), Optional(None)], "fwd", [1], priority=1)
    t.insert([Ternary(0x12, 0xFF), Range(0, 255), Optional(7)], "fwd", [2], priority=10)
    assert t.lookup((0x12, 3, 7)).args == (2,)    # higher priority number wins
    assert t.lookup((0x12, 3, 8)).args == (1,)
    assert t.lookup((0x13, 6, 7)) is None


def test_errors_name_table_key_and_value():
    t = table(("exact", 8), size=1)
    t.insert([Exact(1)], "fwd", [1])
    assert code_of(lambda: t.insert([Exact(1)], "fwd", [2])) is C.DUPLICATE_ENTRY
    assert code_of(lambda: t.insert([Exact(2)], "fwd", [2])) is C.TABLE_FULL
    assert code_of(lambda: t.insert([Exact(256)], "fwd", [2])) is C.BAD_MATCH_KEY
    assert code_of(lambda: t.insert([Exact(1), Exact(1)], "fwd", [2])) is C.BAD_MATCH_KEY
    assert code_of(lambda: t.modify([Exact(3)], "fwd", [2])) is C.NOT_FOUND
    assert code_of(lambda: t.delete([Exact(3)])) is C.NOT_FOUND
    assert code_of(lambda: t.set_default("nope")) is C.BAD_ACTION
    assert code_of(lambda: t.modify([Exact(1)], "fwd", [512])) is C.BAD_ACTION_PARAMS
    assert code_of(lambda: t.modify([Exact(1)], "fwd", [])) is C.BAD_ACTION_PARAMS
    assert code_of(lambda: t.insert([Exact(1)], "fwd", [1], priority=3)) is C.BAD_PRIORITY
    with pytest.raises(RuntimeApiError, match=r"table t: key k0 \(exact, bit<8>\): value 0x100 too wide"):
        t.insert([Exact(256)], "fwd", [1])


def test_ternary_needs_priority_and_canonical_values():
    t = table(("ternary", 8), ("lpm", 8))
    assert code_of(lambda: t.insert([Ternary(1, 0xFF), Lpm(0, 0)], "fwd", [1])) is C.BAD_PRIORITY
    assert code_of(lambda: t.insert([Ternary(0x11, 0x0F), Lpm(0, 0)], "fwd", [1], priority=1)) is C.BAD_MATCH_KEY
    assert code_of(lambda: t.insert([Ternary(1, 1), Lpm(0x81, 1)], "fwd", [1], priority=1)) is C.BAD_MATCH_KEY


def test_modify_keeps_counters_and_default_action():
    t = table(("exact", 8))
    e = t.insert([Exact(1)], "fwd", [1])
    e.packets = 5
    t.modify([Exact(1)], "fwd", [4])
    assert t.lookup((1,)).args == (4,) and t.lookup((1,)).packets == 5
    t.set_default("fwd", [7])
    assert t.default.action == "fwd" and t.default.args == (7,)
