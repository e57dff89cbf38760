"""Report sequence tracking per reporting switch: lost, late and duplicate reports.

The 22-bit report sequence number of each (node ID, hw_id) is unwrapped relative
to the previous arrival (valid while consecutive arrivals are less than 2^21
apart), so ``expected = highest - first + 1`` and ``lost = expected - received``
stay exact across wraparound and reordering: a report that arrives late first
counts as lost and is taken back when it shows up.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from controller.int import native_reports
from formats.telemetry_report import SEQ_MOD

_HALF = SEQ_MOD // 2


@dataclass(slots=True, kw_only=True)
class SeqState:
    """Counters of one reporting switch."""

    node_id: int
    hw_id: int
    first: int
    highest: int
    last: int
    received: int = 0
    late: int = 0
    duplicates: int = 0

    @property
    def expected(self) -> int:
        return self.highest - self.first + 1

    @property
    def lost(self) -> int:
        """Reports missing so far (never negative; duplicates are counted apart)."""
        return max(0, self.expected - (self.received - self.duplicates))


class SeqTracker:
    """Per-switch report sequence accounting, vectorised over a batch."""

    def __init__(self) -> None:
        self.switches: dict[int, SeqState] = {}
        #: each switch's run in C (reports.c), the numpy passes below as the fallback
        self.native = native_reports.available()

    def update(self, node_id: np.ndarray, hw_id: np.ndarray, seq: np.ndarray) -> None:
        """Account one batch, in arrival order."""
        if len(seq) == 0:
            return
        key = (node_id.astype(np.uint64) << np.uint64(6)) | hw_id.astype(np.uint64)
        s_all = seq.astype(np.int64)
        if (key == key[0]).all():     # one reporting switch: no sort
            runs = [(int(key[0]), s_all)]
        else:
            order = np.argsort(key, kind="stable")
            k = key[order]
            s = s_all[order]
            starts = np.flatnonzero(np.concatenate(([True], k[1:] != k[:-1])))
            ends = np.append(starts[1:], len(k))
            runs = [(int(k[a]), s[a:b]) for a, b in zip(starts.tolist(), ends.tolist())]
        for kk, grp in runs:
            st = self.switches.get(kk)
            if st is None:
                st = SeqState(node_id=kk >> 6, hw_id=kk & 63, first=int(grp[0]),
                              highest=int(grp[0]), last=int(grp[0]))
                st.received = 1
                self.switches[kk] = st
                grp = grp[1:]
                if len(grp) == 0:
                    continue
            if self.native:
                st.last, st.highest, late, dups = native_reports.seq_run(
                    grp, SEQ_MOD, st.last, st.highest)
                st.late += late
                st.duplicates += dups
                st.received += len(grp)
                continue
            base = st.last
            prev_wrapped = np.empty_like(grp)
            prev_wrapped[0] = base % SEQ_MOD
            prev_wrapped[1:] = grp[:-1]
            d = (grp - prev_wrapped) % SEQ_MOD
            d[d >= _HALF] -= SEQ_MOD
            ext = np.cumsum(d)
            ext += base
            running = np.maximum.accumulate(ext)
            np.maximum(running, st.highest, out=running)
            prior_max = np.empty_like(ext)     # the highest before each report
            prior_max[0] = st.highest
            prior_max[1:] = running[:-1]
            st.late += int(np.count_nonzero(ext < prior_max))
            st.duplicates += int(np.count_nonzero(ext == prior_max))
            st.received += len(grp)
            st.highest = int(running[-1])
            st.last = int(ext[-1])
