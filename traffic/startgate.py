"""The start gate of a multi-rank run: no rank sends before every rank can receive.

Why: RDMA connects a queue pair (both ends through RTR and RTS) before anything is
posted, so a first packet always finds its receiver.  Ranks started as separate
processes bind at different times (a busy host takes seconds to import and bind), and a
rank that starts at a fixed wall-clock time can send its first window to a peer that is
not bound yet: the window is lost, and the sender waits out its first retransmission
timeout (the demo lost 1.6 s of a 10 s job so on a loaded machine).

The protocol is files, so it works across network namespaces (they share the file
system): each rank, once bound, creates ``<start file>.ready-<rank>`` and waits for the
start file; whoever launched the ranks waits for every marker and then writes the start
time (Unix seconds) into the start file, atomically.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from traffic.errors import TrafficError

__all__ = ["clear", "mark_ready", "ready_path", "release", "start_together", "wait_all_ready",
           "wait_start"]


def ready_path(start_file: Path, rank: int) -> Path:
    """Where rank ``rank`` says it is bound."""
    return start_file.with_name(f"{start_file.name}.ready-{rank}")


def clear(start_file: Path) -> None:
    """Remove a previous run's start file and markers (before starting ranks into a
    folder that may hold them: they would start at once)."""
    start_file.unlink(missing_ok=True)
    for marker in start_file.parent.glob(f"{start_file.name}.ready-*"):
        marker.unlink(missing_ok=True)


def mark_ready(start_file: Path, rank: int) -> None:
    """Say this rank is bound and answers its peers."""
    ready_path(start_file, rank).touch()


def wait_start(start_file: Path, timeout_s: float) -> float:
    """The start time the launcher wrote into ``start_file``."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            return float(start_file.read_text())
        except (OSError, ValueError):   # not there yet (it is renamed into place)
            time.sleep(0.01)
    raise TrafficError(f"no start time in {start_file} within {timeout_s:g} s")


def wait_all_ready(start_file: Path, nranks: int, *, timeout_s: float,
                   alive: Callable[[], bool] = lambda: True) -> list[int]:
    """Wait until every rank's marker exists; returns the ranks still missing (empty
    when all are bound; the rest when ``timeout_s`` passed or ``alive()`` turned false,
    e.g. a rank process exited)."""
    end = time.monotonic() + timeout_s
    while True:
        missing = [r for r in range(nranks) if not ready_path(start_file, r).exists()]
        if not missing or time.monotonic() >= end or not alive():
            return missing
        time.sleep(0.02)


def release(start_file: Path, at_unix_s: float) -> None:
    """Write the start time (to a temporary name, then renamed: never half a number)."""
    tmp = start_file.with_name(start_file.name + ".tmp")
    tmp.write_text(f"{at_unix_s:.6f}")
    tmp.rename(start_file)


def start_together(start_file: Path, nranks: int, *, timeout_s: float,
                   alive: Callable[[], bool] = lambda: True,
                   not_before: float = 0.0) -> tuple[float, list[int]]:
    """The launcher's half of the gate: wait for every rank's marker (see
    :func:`wait_all_ready`), then write a start time a moment ahead (0.1 s plus 20 ms a
    rank: each rank polls the start file, and a loaded host wakes late), never before
    ``not_before``.  Returns the start time and the ranks still missing (released
    anyway: the caller says what happened to them)."""
    missing = wait_all_ready(start_file, nranks, timeout_s=timeout_s, alive=alive)
    at = max(not_before, time.time() + 0.1 + 0.02 * nranks)
    release(start_file, at)
    return at, missing
