"""The native erasure code (traffic/native/ec.c, Intel ISA-L) against traffic/fec.py.

Both ends of a QP must interoperate on the wire, so the code is the same, not merely
equivalent: the same coefficient matrix, equal repair bytes for any block, and any k
of the k + m symbols decode to the data with either implementation, k and m changing
from block to block through the same context.
"""
from __future__ import annotations

import ctypes
import random
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traffic import fec
from traffic.errors import FecError
from traffic.native import ec
from traffic.native.ec import _lib


def test_coefficients_are_the_reference_ones() -> None:
    assert ec.coefficients(ec.MAX_K, ec.MAX_M) == fec.coefficients(fec.MAX_K, fec.MAX_M)
    assert (ec.MAX_K, ec.MAX_M) == (fec.MAX_K, fec.MAX_M)
    assert set(ec.coefficients(7, 1)[0]) == {1}   # repair 0 is the XOR


@st.composite
def block_st(draw: st.DrawFn) -> tuple[list[bytes], int, list[int]]:
    """Data symbols, m, and the indexes (0..k+m-1) of the k symbols that arrive."""
    k = draw(st.one_of(st.integers(1, 12), st.integers(1, ec.MAX_K)))
    m = draw(st.integers(0, ec.MAX_M))
    n = draw(st.one_of(st.integers(1, 70), st.sampled_from([1024, 4096])))
    rng = random.Random(draw(st.integers(0, 2**32)))   # bytes from a drawn seed: cheap
    data = [rng.randbytes(n) for _ in range(k)]
    if draw(st.booleans()):                               # and some structured symbols
        data[0], data[-1] = bytes(n), b"\xff" * n
    arrive = draw(st.permutations(range(k + m)))[:k]
    return data, m, sorted(arrive)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks=st.lists(block_st(), min_size=1, max_size=4))
def test_encode_equal_bytes_and_decode_from_any_k_symbols(
        blocks: list[tuple[list[bytes], int, list[int]]]) -> None:
    for data, m, arrive in blocks:      # (k, m) change from block to block
        k = len(data)
        repair = ec.encode(data, m)
        assert repair == fec.encode(data, m)
        got_d = {i: data[i] for i in arrive if i < k}
        got_r = {i - k: repair[i - k] for i in arrive if i >= k}
        want = {i: data[i] for i in range(k) if i not in got_d}
        assert ec.decode(k, m, got_d, got_r) == want
        assert fec.decode(k, m, got_d, got_r) == want


def test_too_few_symbols_and_bad_blocks_are_fec_errors() -> None:
    data = [bytes([i]) * 8 for i in range(4)]
    repair = ec.encode(data, 2)
    with pytest.raises(FecError, match="3 data symbols missing but only 2"):
        ec.decode(4, 2, {0: data[0]}, {0: repair[0], 1: repair[1]})
    with pytest.raises(FecError, match="outside 1..128"):
        ec.encode([b"x"] * 129, 1)
    with pytest.raises(FecError, match="m=17 outside"):
        ec.encode([b"x"], 17)
    with pytest.raises(FecError, match="differ in length"):
        ec.encode([b"xx", b"x"], 1)
    with pytest.raises(FecError, match="empty block"):
        ec.encode([], 1)
    with pytest.raises(FecError, match="empty symbols"):
        ec.encode([b"", b""], 1)
    with pytest.raises(FecError, match="index 4 outside"):
        ec.decode(4, 2, {4: data[0]}, {})


def test_bytearray_symbols_and_threads_each_with_a_context() -> None:
    data = [bytearray(range(i, i + 64)) for i in range(6)]
    want = fec.encode(data, 3)
    results: list[bool] = []

    def work() -> None:
        for _ in range(50):
            results.append(ec.encode(data, 3) == want)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 200 and all(results)


def test_c_api_reports_too_few_symbols() -> None:
    """The C entry point itself, as the engine calls it: NULL marks a missing symbol."""
    lib = _lib()
    ctx = lib.tn_ec_new()
    try:
        data = [b"a" * 16, b"b" * 16, b"c" * 16]
        rep = [ctypes.create_string_buffer(16) for _ in range(2)]
        rp = (ctypes.c_char_p * 2)(*[ctypes.cast(r, ctypes.c_char_p) for r in rep])
        assert lib.tn_ec_encode(ctx, 3, 2, 16, (ctypes.c_char_p * 3)(*data), rp) == 0
        assert rep[0].raw == bytes(a ^ b ^ c for a, b, c in zip(*data, strict=True))
        out = [ctypes.create_string_buffer(16) for _ in range(3)]
        op = (ctypes.c_char_p * 3)(*[ctypes.cast(o, ctypes.c_char_p) for o in out])
        missing3 = (ctypes.c_char_p * 3)(None, None, None)
        assert lib.tn_ec_decode(ctx, 3, 2, 16, missing3, rp, op) == -2   # TN_EC_ETOOFEW
        two_lost = (ctypes.c_char_p * 3)(None, data[1], None)
        assert lib.tn_ec_decode(ctx, 3, 2, 16, two_lost, rp, op) == 2
        assert (out[0].raw, out[2].raw) == (data[0], data[2])
        assert lib.tn_ec_encode(ctx, 0, 1, 16, (ctypes.c_char_p * 1)(), rp) == -1  # EINVAL
    finally:
        lib.tn_ec_free(ctx)
