"""Key -> table slot for the hop and flow tables, vectorised over a batch of keys.

A Python dict costs one lookup (and, for a flow, one tuple) per distinct key of a
batch; with thousands of flows per receive round that was a third of the flow
table's time.  ``SlotMap`` is an open-addressing hash table in numpy arrays (linear
probing, tombstones on release, rebuilt when tombstones pile up), so a batch of
distinct keys is looked up, and its new keys inserted, in a few whole-array passes:
one pass per probe step, and at a load of at most one half a step rarely goes past
two.

Keys are rows of ``width`` uint64 words (a hop: one word, node ID << 16 | port; a
flow: two, source << 32 | destination and UDP port << 32 | QP).  Slots are
0..capacity-1; when none is free, the least recently updated slots that the batch
does not use are evicted.
"""
from __future__ import annotations

import numpy as np

from controller.int import native_tables

__all__ = ["SlotMap"]

_EMPTY, _TOMB = -1, -2
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_MAX = np.iinfo(np.int64).max


class SlotMap:
    """Distinct keys -> slots, allocating (and evicting) for new keys."""

    def __init__(self, capacity: int, width: int = 1) -> None:
        self.capacity, self.width = capacity, width
        #: probe key by key in C (tables.c), the numpy passes below as the fallback
        self.native = native_tables.available()
        size = 8
        while size < 2 * capacity:
            size <<= 1
        self._mask = np.uint64(size - 1)
        self._tkeys = np.zeros((width, size), np.uint64)   # key words per table position
        self._tslot = np.full(size, _EMPTY, np.int64)      # slot, or empty / tombstone
        self._tombs = 0
        self.keys = np.zeros((width, capacity), np.uint64)  # key of each slot
        self._pos = np.zeros(capacity, np.int64)            # table position of each slot
        self.used = np.zeros(capacity, bool)
        self._free = np.arange(capacity - 1, -1, -1, dtype=np.int64)  # a stack: pop from the end
        self._nfree = capacity
        #: the keys of the last lookup and their slots: a steady load (the same hops,
        #: the same flows round after round) skips the probe
        self._memo = (np.zeros((width, 0), np.uint64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return self.capacity - self._nfree

    def _hash(self, keys: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            h = keys[0] * _M1
            for w in range(1, self.width):
                h = (h ^ (h >> np.uint64(31))) + keys[w] * _M2
            h ^= h >> np.uint64(29)
        return (h & self._mask).astype(np.int64)

    def find(self, key: tuple[int, ...]) -> int | None:
        """The slot of one key, or None."""
        k = np.array(key, np.uint64).reshape(self.width, 1)
        slots, _ = self._probe(k)
        return int(slots[0]) if slots[0] >= 0 else None

    def _probe(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slots of ``keys`` (-1 if absent) and, for the absent ones, the first free
        (empty or tombstone) position on their probe sequence."""
        if self.native:
            return native_tables.slot_probe(keys, self._tkeys, self._tslot)
        pos = self._hash(keys)
        ts = self._tslot[pos]          # the first step on whole arrays: most keys end here
        match = ts >= 0
        for w in range(self.width):
            match &= self._tkeys[w, pos] == keys[w]
        slots = np.where(match, ts, -1)
        free_at = np.where(ts < 0, pos, -1)
        idx = np.flatnonzero(~match & (ts != _EMPTY))
        mask = int(self._mask)
        while idx.size:
            p = (pos[idx] + 1) & mask
            pos[idx] = p
            ts = self._tslot[p]
            match = ts >= 0
            for w in range(self.width):
                match &= self._tkeys[w, p] == keys[w, idx]
            slots[idx[match]] = ts[match]
            free = (ts < 0) & (free_at[idx] < 0)   # the first tombstone or empty
            free_at[idx[free]] = p[free]
            idx = idx[~(match | (ts == _EMPTY))]
        return slots, free_at

    def _place(self, keys: np.ndarray, at: np.ndarray, slots: np.ndarray) -> None:
        """Write absent, distinct ``keys`` with their ``slots`` at free positions,
        starting from ``at`` (a free position each; keys that share one move on)."""
        mask = int(self._mask)
        idx = np.arange(keys.shape[1])
        at = at.copy()
        while idx.size:
            p = at[idx]
            _, first = np.unique(p, return_index=True)
            win = idx[first]
            pw = p[first]
            self._tombs -= int((self._tslot[pw] == _TOMB).sum())
            self._tslot[pw] = slots[win]
            self._tkeys[:, pw] = keys[:, win]
            self._pos[slots[win]] = pw
            lose = np.ones(idx.size, bool)
            lose[first] = False
            idx = idx[lose]
            q = (at[idx] + 1) & mask
            while idx.size:          # the next free position of each loser
                busy = self._tslot[q] >= 0
                if not busy.any():
                    break
                q[busy] = (q[busy] + 1) & mask
            at[idx] = q

    def _rebuild(self) -> None:
        """Drop the tombstones: re-insert every live key."""
        live = np.flatnonzero(self.used)
        self._tslot.fill(_EMPTY)
        self._tombs = 0
        if live.size:
            k = self.keys[:, live]
            self._place(k, self._hash(k), live)

    def lookup(self, keys: np.ndarray, last_update: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slots of distinct ``keys`` (``(width, n)`` uint64), allocating for new ones;
        also a mask of the keys that are new.  ``last_update`` (per slot) picks what
        to evict when the table is full."""
        n = keys.shape[1]
        memo_keys, memo_slots = self._memo
        if memo_keys.shape == keys.shape and (memo_keys == keys).all() \
                and self.used[memo_slots].all() and (self.keys[:, memo_slots] == keys).all():
            return memo_slots.copy(), np.zeros(n, bool)   # the same keys as last round
        slots, new = self._lookup(keys, last_update)
        self._memo = (keys.copy(), slots.copy())
        return slots, new

    def _lookup(self, keys: np.ndarray, last_update: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = keys.shape[1]
        if n > self.capacity:   # more distinct keys than slots: later chunks evict earlier ones
            parts = [self._lookup(keys[:, i:i + self.capacity], last_update)
                     for i in range(0, n, self.capacity)]
            return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
        if len(self) + self._tombs + n > 0.75 * self._tslot.size:
            self._rebuild()
        slots, free_at = self._probe(keys)
        new = slots < 0
        k = int(new.sum())
        if k:
            if k > self._nfree:
                cand = np.where(self.used, last_update, _MAX)
                cand[slots[~new]] = _MAX              # never evict one of this batch
                need = k - self._nfree
                self.release(np.argpartition(cand, need - 1)[:need])
            got = self._free[self._nfree - k:self._nfree][::-1].copy()
            self._nfree -= k
            kn = keys[:, new]
            self.keys[:, got] = kn
            self.used[got] = True
            self._place(kn, free_at[new], got)
            slots[new] = got
        return slots, new

    def release(self, slots: np.ndarray | list[int]) -> None:
        s = np.asarray(slots, np.int64)
        s = np.unique(s[self.used[s]])
        if not s.size:
            return
        self._tslot[self._pos[s]] = _TOMB
        self._tombs += s.size
        self.used[s] = False
        self._free[self._nfree:self._nfree + s.size] = s
        self._nfree += s.size

