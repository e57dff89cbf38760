"""Time bins and link keys shared by every loss-map input."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from controller.lossmap.errors import LinkKeyError, LossInputError, LossParameterError


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeBins:
    """``n_bins`` bins of ``bin_ns`` starting at ``start_ns``; times outside are clipped
    into the first/last bin (``index``) or reported (``inside``)."""

    start_ns: int
    bin_ns: int
    n_bins: int

    def __post_init__(self) -> None:
        if self.bin_ns <= 0:
            raise LossParameterError(f"TimeBins.bin_ns = {self.bin_ns} must be positive")
        if self.n_bins <= 0:
            raise LossParameterError(f"TimeBins.n_bins = {self.n_bins} must be positive")

    @classmethod
    def covering(cls, ts_ns: npt.ArrayLike, bin_ns: int) -> TimeBins:
        """Bins of ``bin_ns`` covering every time in ``ts_ns`` (at least one bin)."""
        t = np.asarray(ts_ns, dtype=np.int64)
        if t.size == 0:
            return cls(start_ns=0, bin_ns=bin_ns, n_bins=1)
        lo = int(t.min()) // bin_ns * bin_ns
        return cls(start_ns=lo, bin_ns=bin_ns, n_bins=int((int(t.max()) - lo) // bin_ns) + 1)

    def index(self, ts_ns: npt.ArrayLike) -> np.ndarray:
        t = np.asarray(ts_ns, dtype=np.int64)
        return np.clip((t - self.start_ns) // self.bin_ns, 0, self.n_bins - 1)

    def inside(self, ts_ns: npt.ArrayLike) -> np.ndarray:
        t = np.asarray(ts_ns, dtype=np.int64)
        return (t >= self.start_ns) & (t < self.start_ns + self.bin_ns * self.n_bins)

    def starts_ns(self) -> np.ndarray:
        """Start time of every bin, in the clock of the inputs (int64 ns)."""
        return self.start_ns + np.arange(self.n_bins, dtype=np.int64) * self.bin_ns

    def edges_s(self) -> np.ndarray:
        """Bin edges in seconds, relative to ``start_ns``."""
        return np.arange(self.n_bins + 1) * self.bin_ns * 1e-9


@dataclass(frozen=True, slots=True)
class LinkIndex:
    """Maps the receiving end of each link, (switch id, ingress port), to a link row.

    Loss events and link sequence counters are kept by the switch that receives
    on the link, per ingress port, so that pair names the link.
    """

    node_id: np.ndarray
    port: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        n = np.asarray(self.node_id, dtype=np.int64)
        p = np.asarray(self.port, dtype=np.int64)
        if n.shape != p.shape or n.ndim != 1 or len(self.names) != n.size:
            raise LossInputError(
                f"LinkIndex: node_id {n.shape}, port {p.shape} and {len(self.names)} names "
                "must have one entry per link")
        keys = (n << 32) | p
        if np.unique(keys).size != keys.size:
            raise LossInputError("LinkIndex: two links share the same (node_id, port)")
        object.__setattr__(self, "node_id", n)
        object.__setattr__(self, "port", p)

    def __len__(self) -> int:
        return int(self.node_id.size)

    def lookup(self, node_id: npt.ArrayLike, port: npt.ArrayLike) -> np.ndarray:
        """Link rows of (node_id, port) pairs; unknown pairs raise ``LinkKeyError``."""
        keys = (self.node_id << 32) | self.port
        order = np.argsort(keys)
        q = (np.asarray(node_id, dtype=np.int64) << 32) | np.asarray(port, dtype=np.int64)
        pos = np.clip(np.searchsorted(keys[order], q), 0, max(keys.size - 1, 0))
        found = keys.size > 0 and keys[order][pos] == q
        if not np.all(found):
            bad = np.flatnonzero(~np.atleast_1d(found))[0]
            qq = np.atleast_1d(q)[bad]
            raise LinkKeyError(
                f"LinkIndex.lookup: no link ends at switch {int(qq >> 32)} port "
                f"{int(qq & 0xFFFFFFFF)}; known: {len(self)} links")
        return order[pos]


def add_at(out: np.ndarray, rows: npt.ArrayLike, cols: npt.ArrayLike,
           weights: npt.ArrayLike) -> None:
    """``out[rows, cols] += weights`` with repeats summed (like ``np.add.at``), via one
    ``bincount`` -- an order of magnitude faster on large batches."""
    n_rows, n_cols = out.shape
    r = np.asarray(rows, dtype=np.int64).ravel()
    c = np.asarray(cols, dtype=np.int64).ravel()
    w = np.broadcast_to(np.asarray(weights, dtype=np.float64), r.shape)
    out += np.bincount(r * n_cols + c, weights=w, minlength=n_rows * n_cols).reshape(out.shape)
