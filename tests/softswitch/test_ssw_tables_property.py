"""Match engines against a brute-force reference on random tables (hypothesis)."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from softswitch.tables import ActionSpec, KeyField, Lpm, Table, Ternary

W = 8
ACTIONS = [ActionSpec(name="a", params=[("v", 16)])]


def lpm_ref(entries: list[tuple[int, int, int]], key: int) -> int | None:
    best = None
    for value, plen, tag in entries:
        mask = ((1 << plen) - 1) << (W - plen)
        if key & mask == value and (best is None or plen > best[0]):
            best = (plen, tag)
    return None if best is None else best[1]


@st.composite
def lpm_entries(draw):
    out = {}
    for _ in range(draw(st.integers(0, 12))):
        plen = draw(st.integers(0, W))
        mask = ((1 << plen) - 1) << (W - plen)
        out[(draw(st.integers(0, 255)) & mask, plen)] = len(out)
    return [(v, p, tag) for (v, p), tag in out.items()]


@settings(max_examples=60, deadline=None)
@given(lpm_entries(), st.lists(st.integers(0, 255), min_size=1, max_size=20))
def test_lpm_matches_reference(entries, keys):
    t = Table(name="t", keys=[KeyField(name="k", match_kind="lpm", width=W)], actions=ACTIONS)
    for v, p, tag in entries:
        t.insert([Lpm(v, p)], "a", [tag])
    for k in keys:
        e = t.lookup((k,))
        assert (e.args[0] if e else None) == lpm_ref(entries, k)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(1, 50)), max_size=12),
       st.lists(st.integers(0, 255), min_size=1, max_size=20))
def test_ternary_highest_priority_wins(raw, keys):
    t = Table(name="t", keys=[KeyField(name="k", match_kind="ternary", width=W)], actions=ACTIONS)
    installed = []
    for value, mask, prio in raw:
        key = (value & mask, mask, prio)
        if any(k[:3] == key for k in installed):
            continue
        t.insert([Ternary(value & mask, mask)], "a", [len(installed)], priority=prio)
        installed.append(key + (len(installed),))
    for k in keys:
        matches = [(prio, -i, tag) for i, (v, m, prio, tag) in enumerate(installed) if k & m == v]
        want = max(matches)[2] if matches else None
        e = t.lookup((k,))
        assert (e.args[0] if e else None) == want
