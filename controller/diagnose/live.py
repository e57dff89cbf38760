"""Diagnosis inside a running controller: a thread that re-reads the ranks' collective
logs and the controller's own telemetry exports and keeps the ranked culprits current.

Why in the controller: the controller already holds the topology and writes the
telemetry the diagnosis needs (``OUT/csv/*.csv``, ``OUT/controller_state.json``); a
thread beside it names the culprit while the job still runs, and ``controller show``
and anything reading the state file see it (``diagnosis`` in the state, and
``OUT/summary.json``), without a second process polling the same files.

A round that finds no collective records yet (or a log line half written) leaves the
last verdict as it is; a round that fails is counted in ``errors`` with its reason,
and the next round tries again.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.diagnose.engine import Diagnosis, diagnose
from controller.diagnose.evidence import Evidence, load_telemetry
from controller.diagnose.report import write_summary
from controller.topology.model import Topology

__all__ = ["LiveDiagnosis"]

LOG = logging.getLogger(__name__)


@dataclass(slots=True, kw_only=True)
class LiveDiagnosis:
    """Diagnose every ``every_s`` from the logs under ``logs`` and the telemetry under
    ``out_dir``; ``latest`` is the last diagnosis as a dict (None before the first)."""

    topo: Topology
    out_dir: Path
    logs: Sequence[Path]
    every_s: float = 1.0
    on_change: Callable[[Diagnosis], None] | None = None   # the top culprit changed
    latest: dict[str, Any] | None = None
    rounds: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    _verdict: tuple[tuple[str, str, str], ...] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def step(self, now: float | None = None) -> Diagnosis | None:
        """One round: read, diagnose, publish.  None when there is nothing to read."""
        from traffic.collog import CollogError, read_logs

        self.rounds += 1
        try:
            records = read_logs([p for p in self.logs if Path(p).exists()])
        except CollogError:   # a line being written: the next round reads it whole
            return None
        if not records:
            return None
        ev = Evidence(topo=self.topo, records=records,
                      telemetry=load_telemetry(self.out_dir, self.topo),
                      now=time.time() if now is None else now)
        d = diagnose(ev)
        snap = {**d.as_dict(), "updated_unix_s": time.time(), "rounds": self.rounds}
        with self._lock:
            self.latest = snap
        write_summary(self.out_dir, d)
        verdict = tuple((c.type, c.component, c.kind) for c in d.culprits[:1])
        if verdict != self._verdict:
            self._verdict = verdict
            if self.on_change is not None:
                self.on_change(d)
        return d

    def snapshot(self) -> dict[str, Any] | None:
        """The latest verdict and the thread's counters, for the controller's state."""
        with self._lock:
            if self.latest is None and not self.errors:
                return None
            return {**(self.latest or {}), "errors": dict(self.errors)}

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.step()
            except Exception as exc:  # noqa: BLE001 - counted; the next round retries
                key = type(exc).__name__
                self.errors[key] = self.errors.get(key, 0) + 1
                LOG.warning("live diagnosis round failed: %s", exc)
            self._stop.wait(self.every_s)

    def start(self) -> LiveDiagnosis:
        self._thread = threading.Thread(target=self._run, name="live-diagnosis", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
