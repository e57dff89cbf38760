"""Systematic erasure code over GF(2^8) for FEC + selective repeat.

Why our own: the code must be k data + m repair symbols with k and m changing per block
at run time, XOR when m = 1, and vectorised over symbol bytes; a normalised Cauchy
matrix does all of that in ~100 lines of numpy with no native dependency.

Repair symbol j of a block of ``count`` data symbols is ``sum_i C[j][i] * d_i`` where
``C[j][i] = cauchy(j, i) / cauchy(0, i)`` and ``cauchy(j, i) = 1 / (x_j + y_i)`` with
``y_i = i`` and ``x_j = 128 + j``.  Column scaling keeps every square sub-matrix of a
Cauchy matrix non-singular (so any ``count`` of the ``count + m`` symbols recover the
block) and makes row 0 all ones: repair 0 is the plain XOR of the data.
"""
from __future__ import annotations

from functools import cache

import numpy as np

from traffic.errors import FecError

__all__ = ["MAX_K", "MAX_M", "coefficients", "decode", "encode", "prepare"]

MAX_K = 128
MAX_M = 16
_POLY = 0x11D


@cache
def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exp, log, mul) tables; ``mul[a, b]`` is the GF(256) product (read-only)."""
    exp = np.zeros(512, dtype=np.int32)
    log = np.zeros(256, dtype=np.int32)
    x = 1
    for i in range(255):
        exp[i] = x
        log[x] = i
        x <<= 1
        if x & 0x100:
            x ^= _POLY
    exp[255:510] = exp[0:255]
    a = np.arange(256)
    la = log[a][:, None] + log[a][None, :]
    mul = exp[la].astype(np.uint8)
    mul[0, :] = 0
    mul[:, 0] = 0
    for t in (exp, log, mul):
        t.setflags(write=False)
    return exp, log, mul


def _inv(a: int) -> int:
    exp, log, _ = _tables()
    if a == 0:
        raise FecError("GF(256): zero has no inverse")
    return int(exp[255 - log[a]])


def _mul(a: int, b: int) -> int:
    return int(_tables()[2][a, b])


def prepare(k: int, m: int) -> None:
    """Build the GF(256) tables and the k x m coefficients now, not at the first block.

    Why: building them takes ~7 ms, longer than a pacer's burst allowance; done lazily
    it stalls a sender (and the receiver's repair) in the middle of a transfer.
    """
    _tables()
    if m > 0:
        coefficients(k, m)


@cache
def coefficients(count: int, m: int) -> tuple[tuple[int, ...], ...]:
    """The m x count repair coefficient matrix (row 0 all ones)."""
    _check(count, m)
    raw = [[_inv((128 + j) ^ i) for i in range(count)] for j in range(m)]
    return tuple(tuple(_mul(raw[j][i], _inv(raw[0][i])) for i in range(count))
                 for j in range(m))


def _check(count: int, m: int) -> None:
    if not 1 <= count <= MAX_K:
        raise FecError(f"FEC block: data count {count} outside 1..{MAX_K}")
    if not 0 <= m <= MAX_M:
        raise FecError(f"FEC block: repair count m={m} outside 0..{MAX_M}")


def _as_matrix(symbols: list[bytes] | list[bytearray], where: str) -> np.ndarray:
    n = len(symbols[0])
    if any(len(s) != n for s in symbols):
        raise FecError(f"{where}: symbols differ in length: {sorted({len(s) for s in symbols})}")
    return np.frombuffer(b"".join(bytes(s) for s in symbols), dtype=np.uint8).reshape(-1, n)


def encode(data: list[bytes] | list[bytearray], m: int) -> list[bytes]:
    """Return m repair symbols for equal-length data symbols."""
    if not data:
        raise FecError("FEC encode: empty block")
    _check(len(data), m)
    d = _as_matrix(data, "FEC encode")
    if m == 0:
        return []
    mul = _tables()[2]
    out = [np.bitwise_xor.reduce(d, axis=0).tobytes()]
    coef = coefficients(len(data), m)
    for j in range(1, m):
        acc = np.zeros(d.shape[1], dtype=np.uint8)
        for i, c in enumerate(coef[j]):
            acc ^= mul[c][d[i]]
        out.append(acc.tobytes())
    return out


def decode(count: int, m: int, data: dict[int, bytes], repair: dict[int, bytes]) -> dict[int, bytes]:
    """Recover the missing data symbols of a block.

    ``data`` maps data index (0..count-1) to symbol, ``repair`` maps repair index
    (0..m-1) to symbol.  Returns {index: symbol} for the data symbols that were missing.
    Raises :class:`FecError` when fewer than ``count`` symbols are present.
    """
    _check(count, m)
    missing = [i for i in range(count) if i not in data]
    if not missing:
        return {}
    if len(missing) > len(repair):
        raise FecError(
            f"FEC decode: {len(missing)} data symbols missing but only {len(repair)} "
            f"repair symbols received (block of {count}+{m})"
        )
    _, _, mul = _tables()
    coef = coefficients(count, m)
    rows = sorted(repair)[: len(missing)]
    syms = list(data.values()) + [repair[j] for j in rows]
    n = len(syms[0])
    if any(len(s) != n for s in syms):
        raise FecError("FEC decode: symbols differ in length")
    # right-hand side: repair minus the known data contributions
    rhs = []
    for j in rows:
        acc = np.frombuffer(repair[j], dtype=np.uint8).copy()
        for i, s in data.items():
            acc ^= mul[coef[j][i]][np.frombuffer(s, dtype=np.uint8)]
        rhs.append(acc)
    # solve A x = rhs with A[r][c] = coef[rows[r]][missing[c]] by Gauss-Jordan
    e = len(missing)
    a = [[coef[rows[r]][missing[c]] for c in range(e)] for r in range(e)]
    for col in range(e):
        piv = next((r for r in range(col, e) if a[r][col]), None)
        if piv is None:
            raise FecError("FEC decode: singular system (corrupted coefficients)")
        a[col], a[piv] = a[piv], a[col]
        rhs[col], rhs[piv] = rhs[piv], rhs[col]
        inv = _inv(a[col][col])
        a[col] = [_mul(inv, v) for v in a[col]]
        rhs[col] = mul[inv][rhs[col]]
        for r in range(e):
            f = a[r][col]
            if r != col and f:
                a[r] = [v ^ _mul(f, w) for v, w in zip(a[r], a[col])]
                rhs[r] = rhs[r] ^ mul[f][rhs[col]]
    return {missing[c]: rhs[c].tobytes() for c in range(e)}
