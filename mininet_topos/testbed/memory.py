"""Resident memory of the test bed's own processes through a run, and whether it stayed flat.

Why: a flood of forgeries must not make the controller or an agent grow (per-sender
replay windows, rejection logs or counters keyed by forged ids would).  ``MemoryWatch``
reads ``VmRSS`` from ``/proc/PID/status`` of the processes the test bed started, each
time the runner polls, and keeps per process the resident size when the watched phase
starts (``mark_start``, e.g. when the flood begins), the largest seen and the last.
``flat`` is a wide margin on purpose: Python's allocator and numpy keep freed memory,
so only growth beyond ``max(16 MiB, 20 %)`` of the start counts.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["FLAT_ABS_MIB", "FLAT_FRACTION", "MemoryWatch", "ProcMemory", "is_flat", "read_rss_kib"]

FLAT_ABS_MIB = 16.0
FLAT_FRACTION = 0.2


def read_rss_kib(pid: int, proc: Path = Path("/proc")) -> tuple[int, str] | None:
    """(VmRSS in KiB, command name) of ``pid``, None when it is gone."""
    try:
        text = (proc / str(pid) / "status").read_text()
    except OSError:
        return None
    rss, comm = None, ""
    for line in text.splitlines():
        if line.startswith("Name:"):
            comm = line.partition(":")[2].strip()
        elif line.startswith("VmRSS:"):
            try:
                rss = int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None if rss is None else (rss, comm)


def is_flat(start_mib: float, end_mib: float, *, abs_mib: float = FLAT_ABS_MIB,
            fraction: float = FLAT_FRACTION) -> bool:
    """True when ``end`` is at most ``start + max(abs_mib, fraction * start)``."""
    return end_mib <= start_mib + max(abs_mib, fraction * start_mib)


@dataclass(slots=True, kw_only=True)
class ProcMemory:
    """What was seen of one process (KiB)."""

    pid: int
    comm: str = ""
    first_kib: int = 0
    start_kib: int = 0
    peak_kib: int = 0
    end_kib: int = 0
    samples: int = 0

    def add(self, kib: int, comm: str, *, started: bool) -> None:
        if not self.samples:
            self.first_kib = kib
        if not started or not self.start_kib:
            self.start_kib = kib   # until the phase starts, the latest is its start
        self.comm = comm or self.comm
        self.peak_kib = max(self.peak_kib, kib) if started else self.peak_kib
        self.end_kib = kib
        self.samples += 1

    def summary(self) -> dict[str, Any]:
        start, peak, end = (round(k / 1024, 1) for k in (self.start_kib,
                                                        max(self.peak_kib, self.start_kib),
                                                        self.end_kib))
        return {"pid": self.pid, "comm": self.comm, "first_mib": round(self.first_kib / 1024, 1),
                "start_mib": start, "peak_mib": peak, "end_mib": end, "samples": self.samples,
                "flat": is_flat(start, end)}


class MemoryWatch:
    """RSS of named processes, sampled on demand."""

    def __init__(self, pids: dict[str, int], proc: Path = Path("/proc"),
                 start_at: float | None = None) -> None:
        self.proc = proc
        self.procs = {name: ProcMemory(pid=pid) for name, pid in pids.items()}
        self.started = False
        self.start_at = start_at
        """Wall-clock time ``poll`` marks the start at (None: only ``mark_start``)."""

    def poll(self, now: float) -> None:
        """A sample; the first one at or after ``start_at`` is the start."""
        if not self.started and self.start_at is not None and now >= self.start_at:
            self.mark_start()
        else:
            self.sample()

    def sample(self) -> None:
        """One reading of every process still there."""
        for m in self.procs.values():
            got = read_rss_kib(m.pid, self.proc)
            if got is not None:
                m.add(got[0], got[1], started=self.started)

    def mark_start(self) -> None:
        """The watched phase begins now: this reading is every process's start."""
        self.started = False
        self.sample()
        self.started = True
        for m in self.procs.values():
            m.peak_kib = m.start_kib

    def summary(self) -> dict[str, dict[str, Any]]:
        """Per process: pid, command, MiB at the first sample, at the start, peak and
        end, the number of samples and ``flat``."""
        return {n: m.summary() for n, m in sorted(self.procs.items()) if m.samples}
