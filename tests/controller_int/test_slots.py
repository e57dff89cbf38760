"""SlotMap (controller.int.slots) against a dict doing the same, key by key."""
from __future__ import annotations

import numpy as np
import pytest

from controller.int import native_tables
from controller.int.slots import SlotMap


class _DictMap:
    """The reference: what the hash table must agree with."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.index: dict[tuple[int, ...], int] = {}
        self.key_of: dict[int, tuple[int, ...]] = {}


@pytest.mark.parametrize("width,capacity", [(1, 7), (2, 64), (2, 1000)])
def test_lookup_release_and_eviction_agree_with_a_dict(width: int, capacity: int) -> None:
    rng = np.random.default_rng(capacity)
    m = SlotMap(capacity, width)
    ref = _DictMap(capacity)
    last = np.zeros(capacity, np.int64)
    universe = rng.integers(0, 2**63, size=(width, 3 * capacity), dtype=np.uint64)
    universe[:, :4] = 0                        # a zero key is a key like any other
    universe = np.unique(universe, axis=1)
    for step in range(300):
        n = int(rng.integers(1, min(capacity, 50) + 1))
        keys = universe[:, rng.choice(universe.shape[1], n, replace=False)]
        slots, new = m.lookup(keys, last)
        assert len(set(slots.tolist())) == n                       # distinct keys, distinct slots
        for i in range(n):
            k = tuple(int(x) for x in keys[:, i])
            s = int(slots[i])
            assert bool(new[i]) == (k not in ref.index), (step, k)
            if new[i]:
                old = ref.key_of.pop(s, None)                      # an evicted key
                if old is not None:
                    del ref.index[old]
                    assert old not in {tuple(int(x) for x in keys[:, j]) for j in range(n)}
                ref.index[k] = s
                ref.key_of[s] = k
            else:
                assert ref.index[k] == s
            last[s] = step
        if step % 7 == 0 and ref.index:             # release some (as expiry does)
            drop = rng.choice(sorted(ref.key_of), size=max(1, len(ref.key_of) // 4), replace=False)
            m.release(drop)
            for s in drop.tolist():
                del ref.index[ref.key_of.pop(s)]
        assert len(m) == len(ref.index) == int(m.used.sum())
        for k, s in list(ref.index.items())[:20]:
            assert m.find(k) == s
        assert m.find(tuple([2**64 - 1] * width)) is None


def test_evicts_the_least_recently_updated_and_never_one_of_the_batch() -> None:
    m = SlotMap(4, 1)
    last = np.zeros(4, np.int64)
    s, _ = m.lookup(np.array([[10, 11, 12, 13]], np.uint64), last)
    last[s] = [5, 1, 7, 9]                     # 11 is the oldest, then 10
    s2, new = m.lookup(np.array([[11, 20]], np.uint64), last)
    assert new.tolist() == [False, True]
    assert s2[1] == s[0]                       # 10 went (11 is in the batch)
    assert m.find((10,)) is None and m.find((11,)) == s[1]


def test_more_distinct_keys_than_slots_in_one_batch() -> None:
    m = SlotMap(8, 2)
    keys = np.arange(40, dtype=np.uint64).reshape(2, 20)
    slots, new = m.lookup(keys, np.zeros(8, np.int64))
    assert new.all() and len(slots) == 20 and len(m) == 8
    assert (slots >= 0).all() and (slots < 8).all()


def test_the_same_keys_again_reuse_their_slots_until_one_is_released() -> None:
    m = SlotMap(4, 2)
    last = np.zeros(4, np.int64)
    keys = np.array([[1, 2], [3, 4]], np.uint64)
    s1, new1 = m.lookup(keys, last)
    s2, new2 = m.lookup(keys, last)               # the last round's keys: no probe
    assert new1.all() and not new2.any() and s1.tolist() == s2.tolist()
    m.release([int(s1[0])])
    s3, new3 = m.lookup(keys, last)
    assert new3.tolist() == [True, False] and s3[1] == s1[1]
    m.release([int(s3[0]), int(s3[1])])
    m.lookup(np.array([[9, 2], [9, 4]], np.uint64), last)   # slots reused for other keys
    s4, new4 = m.lookup(keys, last)
    assert new4.tolist() == [True, False] and m.find((1, 3)) == s4[0]


@pytest.mark.skipif(not native_tables.available(), reason="gcc missing: no tables.c to compare")
@pytest.mark.parametrize("width,capacity", [(1, 7), (2, 64), (2, 1000)])
def test_c_probe_equals_numpy_probe(width: int, capacity: int) -> None:
    """tables.c's probe (key by key) finds what the numpy passes find, slots and first
    free positions, on a table with evictions and tombstones."""
    rng = np.random.default_rng(capacity + 1)
    m = SlotMap(capacity, width)
    assert m.native
    last = np.zeros(capacity, np.int64)
    universe = rng.integers(0, 2**63, size=(width, 3 * capacity), dtype=np.uint64)
    universe = np.unique(universe, axis=1)
    for _ in range(100):
        n = int(rng.integers(1, min(capacity, 50) + 1))
        keys = universe[:, rng.choice(universe.shape[1], n, replace=False)]
        m.lookup(keys, last)
        last[:] = rng.integers(0, 1000, capacity)
        if rng.random() < 0.3:
            m.release(rng.choice(capacity, int(rng.integers(1, capacity + 1))))
        probe = universe[:, rng.choice(universe.shape[1], 40)]
        got = m._probe(probe)
        m.native = False
        want = m._probe(probe)
        m.native = True
        assert got[0].tolist() == want[0].tolist()
        assert got[1].tolist() == want[1].tolist()
