"""The hop and flow tables' C pass (controller/int/tables.c) against the numpy path,
on random batches: every column and every ring equal after every round."""
from __future__ import annotations

import numpy as np
import pytest

from controller.int import native_tables
from controller.int.records import HOP_DTYPE, REPORT_DTYPE
from controller.int.state import FlowTable, HopTable

pytestmark = pytest.mark.skipif(not native_tables.available(),
                                reason="tables.c cannot be built here (no gcc)")


def _batch(rng: np.random.Generator, n: int, step: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples over a few flows and hops, with random field sets, repeated and
    late egress timestamps, samples without hops and hop indices past the path limit."""
    s = np.zeros(n, REPORT_DTYPE)
    s["arrival_ns"] = step * 1_000_000 + rng.integers(0, 1000, n)
    s["src_ip"] = rng.integers(1, 4, n)
    s["dst_ip"] = rng.integers(1, 3, n)
    s["sport"] = rng.integers(0, 3, n)
    s["dest_qp"] = rng.integers(0, 5, n)
    s["psn"] = rng.integers(0, 1 << 24, n)
    s["has_bth"] = rng.integers(0, 2, n)
    counts = rng.integers(0, 20, n)
    counts[rng.random(n) < 0.2] = 0
    s["hop_count"] = counts
    nh = int(counts.sum())
    h = np.zeros(nh, HOP_DTYPE)
    h["sample"] = np.repeat(np.arange(n), counts)
    h["hop_index"] = np.concatenate([np.arange(c) for c in counts]) if nh else []
    h["fields"] = rng.integers(0, 1 << 12, nh)
    h["node_id"] = rng.integers(1, 6, nh)
    h["egress_port"] = rng.integers(0, 4, nh)
    h["hop_latency_us"] = rng.integers(0, 1 << 20, nh)
    h["queue_pkts"] = rng.integers(0, 1 << 20, nh)
    h["queue_bytes"] = rng.integers(0, 1 << 32, nh, dtype=np.uint64)
    h["egress_ts_us"] = step * 1000 + rng.integers(-1500, 1000, nh) + 10_000
    h["tx_bytes"] = rng.integers(0, 1 << 32, nh, dtype=np.uint64)
    h["line_rate_mbps"] = rng.integers(0, 400_000, nh)
    return s, h


def _equal(a: object, b: object) -> None:
    for name, va in vars(a).items() if hasattr(a, "__dict__") else []:
        vb = getattr(b, name)
        if isinstance(va, np.ndarray):
            np.testing.assert_array_equal(va, vb, err_msg=name)
        elif name not in ("native", "_slots"):
            assert va == vb, name


@pytest.mark.parametrize("hop_cap,hop_depth,flow_cap,flow_depth",
                         [(4096, 256, 16384, 32), (8, 3, 6, 2), (30, 1, 100, 5)])
def test_c_pass_equals_numpy(hop_cap: int, hop_depth: int, flow_cap: int, flow_depth: int
                             ) -> None:
    rng = np.random.default_rng(hop_cap + hop_depth)
    ref_h, nat_h = (HopTable(capacity=hop_cap, depth=hop_depth, native=x) for x in (False, True))
    ref_f, nat_f = (FlowTable(capacity=flow_cap, depth=flow_depth, native=x)
                    for x in (False, True))
    for step in range(60):
        s, h = _batch(rng, int(rng.integers(1, 200)), step)
        arrival = s["arrival_ns"][h["sample"]]
        hs_ref = ref_h.update(h, arrival)
        hs_nat = nat_h.update(h, arrival)
        np.testing.assert_array_equal(hs_ref, hs_nat)
        np.testing.assert_array_equal(ref_f.update(s, h, hs_ref), nat_f.update(s, h, hs_nat))
        if step % 9 == 8:
            assert ref_f.expire(step * 1_000_000) == nat_f.expire(step * 1_000_000)
        _equal(ref_h, nat_h)
        _equal(ref_f, nat_f)


def test_a_hop_record_of_no_sample_is_an_error() -> None:
    rng = np.random.default_rng(1)
    s, h = _batch(rng, 5, 0)
    h = h[:1].copy()
    h["sample"] = 99
    with pytest.raises(ValueError, match="outside its batch"):
        FlowTable(native=True).update(s, h, np.zeros(1, np.int64))


def test_without_gcc_there_is_no_native_pass(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: object) -> None:
    """No cached build and no gcc: ``build`` gives None (the tables then use numpy)."""
    from controller.int import native
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setattr(native.shutil, "which", lambda _name: None)
    assert native.build("tables", "numpy") is None
    t = HopTable(native=False)
    h = np.zeros(1, HOP_DTYPE)
    assert t.update(h, np.zeros(1, np.int64)).tolist() == [0]


def test_c_grouping_equals_lexsort() -> None:
    """tables.c's hop grouping gives lexsort's order (by key, then egress ts, stable)
    where every hop's timestamps rise or repeat, and declines where one falls."""
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(1, 3000))
        h = np.zeros(n, HOP_DTYPE)
        h["node_id"] = rng.integers(0, 1 << 32, n, dtype=np.uint64) if rng.random() < 0.3 \
            else rng.integers(1, 9, n)
        h["egress_port"] = rng.integers(0, 3, n)
        h["egress_ts_us"] = np.sort(rng.integers(0, 50, n)) + (1 << 40)   # rising, ties
        key = (h["node_id"].astype(np.uint64) << np.uint64(16)) | h["egress_port"]
        want = np.lexsort((h["egress_ts_us"], key))
        got = native_tables.hop_group(h)
        assert got is not None
        order, starts, uniq = got
        np.testing.assert_array_equal(order, want)
        ks = key[want]
        np.testing.assert_array_equal(starts, np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]]))
        np.testing.assert_array_equal(uniq, ks[starts])
        if n > 1 and len(uniq) < n:
            g = starts[np.argmax(np.diff(np.r_[starts, n]))]   # a hop with 2+ records
            h["egress_ts_us"][order[g + 1]] = h["egress_ts_us"][order[g]] - 1
            assert native_tables.hop_group(h) is None
