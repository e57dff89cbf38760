"""Erasure code: the native ISA-L code (traffic/native/ec.py) vs traffic/fec.py (numpy).

Both run in the same process on the same blocks: encode (m repair symbols of a
k-symbol block) and decode (the first min(k, m) data symbols lost, recovered from the
repair symbols), through the same Python API (ctypes for the native one, so its
figures include the call's marshalling; the engine calls the C code directly).  The
two must give equal bytes, so the ratio is for identical results.  Figures are the
best of ``--rounds`` rounds of at least ``--min-time`` seconds each.

Examples:
  flock /tmp/bench.lock python -m bench.bench_ec
  flock /tmp/bench.lock python -m bench.bench_ec --blocks 8x1x1024 64x16x4096
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from traffic import fec
from traffic.native import NativeLibraryError
from traffic.native import ec as native

DEFAULT_BLOCKS = ["8x1x1024", "8x2x1024", "16x4x1024", "32x4x4096", "64x8x1024", "128x16x1024"]


def _rate(fn: Callable[[], object], nbytes: int, *, rounds: int, min_time: float) -> float:
    """Best bytes/s of ``fn`` (each call handles ``nbytes`` of data) over ``rounds``."""
    best = 0.0
    for _ in range(rounds):
        n, t0 = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            dt = time.perf_counter() - t0
            if dt >= min_time:
                break
        best = max(best, n * nbytes / dt)
    return best


def _block(spec: str) -> tuple[int, int, int]:
    try:
        k, m, size = (int(x) for x in spec.split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"block {spec!r}: expected KxMxSIZE, e.g. 8x2x1024")
    if not (1 <= k <= fec.MAX_K and 1 <= m <= fec.MAX_M and size > 0):
        raise argparse.ArgumentTypeError(f"block {spec!r}: k 1..{fec.MAX_K}, m 1..{fec.MAX_M}")
    return k, m, size


def _measure(k: int, m: int, size: int, *, rounds: int, min_time: float
             ) -> tuple[float, float, float, float] | str:
    """(encode fec.py, encode native, decode fec.py, decode native) bytes/s, or what differs."""
    data = [os.urandom(size) for _ in range(k)]
    repair = fec.encode(data, m)
    if native.encode(data, m) != repair:
        return "repair symbols differ"
    lost = min(k, m)
    have = {i: data[i] for i in range(lost, k)}
    rep = dict(enumerate(repair))
    want = {i: data[i] for i in range(lost)}
    if native.decode(k, m, have, rep) != want or fec.decode(k, m, have, rep) != want:
        return "decoded symbols differ"
    n = k * size
    return (_rate(lambda: fec.encode(data, m), n, rounds=rounds, min_time=min_time),
            _rate(lambda: native.encode(data, m), n, rounds=rounds, min_time=min_time),
            _rate(lambda: fec.decode(k, m, have, rep), n, rounds=rounds, min_time=min_time),
            _rate(lambda: native.decode(k, m, have, rep), n, rounds=rounds, min_time=min_time))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", nargs="+", type=_block, default=[_block(b) for b in DEFAULT_BLOCKS],
                    metavar="KxMxSIZE", help="data symbols x repair symbols x symbol bytes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=0.2, help="seconds per round")
    a = ap.parse_args(argv)
    try:
        native.encode([b"x"], 1)
    except NativeLibraryError as e:
        print(f"bench_ec: {e}", file=sys.stderr)
        return 2
    print(f"{'block k+m x bytes':>20} {'encode MB/s':>24} {'ratio':>7} "
          f"{'decode MB/s':>24} {'ratio':>7}")
    print(f"{'':>20} {'fec.py':>11} {'native':>12} {'':>7} {'fec.py':>11} {'native':>12}")
    for k, m, size in a.blocks:
        fig = _measure(k, m, size, rounds=a.rounds, min_time=a.min_time)
        if isinstance(fig, str):
            print(f"bench_ec: {k}+{m}: {fig}", file=sys.stderr)
            return 1
        e_py, e_c, d_py, d_c = fig
        print(f"{f'{k}+{m} x {size}':>20} {e_py / 1e6:>11.1f} {e_c / 1e6:>12.1f} "
              f"{e_c / e_py:>6.1f}x {d_py / 1e6:>11.1f} {d_c / 1e6:>12.1f} {d_c / d_py:>6.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
