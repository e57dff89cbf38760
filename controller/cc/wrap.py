"""Modular counter arithmetic for switch counters that wrap.

Switches export tx bytes modulo 2^32 and timestamps modulo 2^48 (v1model) or 2^32;
a forward difference taken modulo the counter width is correct as long as fewer
than one full wrap happens between two samples, which holds for any sane sampling
period (2^32 bytes is 0.34 s at 100 Gbit/s).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from controller.cc.errors import ParameterError


def delta_mod(new: npt.ArrayLike, old: npt.ArrayLike, bits: int) -> np.ndarray:
    """Forward difference ``new - old`` modulo ``2**bits`` as uint64.

    Works element-wise on arrays of any shape; ``bits`` must be in 1..64.
    """
    if not 1 <= bits <= 64:
        raise ParameterError(f"delta_mod: counter width bits={bits} is outside 1..64")
    n = np.asarray(new).astype(np.uint64, copy=False)
    o = np.asarray(old).astype(np.uint64, copy=False)
    with np.errstate(over="ignore"):
        d = n - o  # uint64 arithmetic wraps modulo 2^64
    if bits < 64:
        d &= np.uint64((1 << bits) - 1)
    return d


def delta_mod_n(new: npt.ArrayLike, old: npt.ArrayLike, modulus: int) -> np.ndarray:
    """Forward difference ``new - old`` modulo any ``modulus`` in 2..2^64, as uint64.

    For counters whose wrap is not a power of two, e.g. a 48-bit microsecond
    timestamp scaled to nanoseconds wraps at ``2**48 * 1000``. Inputs must already
    be reduced modulo ``modulus``.
    """
    if not 2 <= modulus <= 1 << 64:
        raise ParameterError(f"delta_mod_n: modulus {modulus} is outside 2..2^64")
    if modulus == 1 << 64:
        return delta_mod(new, old, 64)
    n = np.asarray(new).astype(np.uint64, copy=False)
    o = np.asarray(old).astype(np.uint64, copy=False)
    m = np.uint64(modulus)
    with np.errstate(over="ignore"):
        return np.where(n >= o, n - o, n + (m - o))
