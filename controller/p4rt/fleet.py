"""Many switches at once: connect and sync in parallel, with progress per switch.

Why a separate layer: the runner and the CLI want "bring the whole topology up and
tell me, per switch, what happened"; one slow or dead switch must not hold up the
others, and every failure is reported with its switch name, not raised mid-way.
"""
from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Self

from .errors import P4rtError
from .switch import ManagedSwitch, SyncReport


class Phase(enum.StrEnum):
    CONNECTING = "connecting"
    SYNCING = "syncing"
    READY = "ready"
    FAILED = "failed"


@dataclass(slots=True, frozen=True, kw_only=True)
class Progress:
    switch: str
    phase: Phase
    message: str = ""
    error_kind: str = ""     # class name of the error when FAILED


@dataclass(slots=True, kw_only=True)
class FleetResult:
    reports: dict[str, SyncReport]
    failures: dict[str, P4rtError]

    @property
    def ok(self) -> bool:
        return not self.failures


class Fleet:
    """Named managed switches; `bring_up` connects and syncs them all in parallel."""

    def __init__(self, switches: list[ManagedSwitch]) -> None:
        self.switches = {s.name: s for s in switches}
        self._lock = threading.Lock()

    def bring_up(self, progress: Callable[[Progress], None] | None = None,
                 max_workers: int = 16) -> FleetResult:
        result = FleetResult(reports={}, failures={})
        say = progress or (lambda _p: None)
        lock = threading.Lock()

        def one(sw: ManagedSwitch) -> None:
            try:
                say(Progress(switch=sw.name, phase=Phase.CONNECTING, message=f"{sw.address} device {sw.device_id}"))
                sw.connect()
                say(Progress(switch=sw.name, phase=Phase.SYNCING))
                rep = sw.sync()
                with lock:
                    result.reports[sw.name] = rep
                say(Progress(switch=sw.name, phase=Phase.READY, message=rep.summary()))
            except P4rtError as exc:
                with lock:
                    result.failures[sw.name] = exc
                say(Progress(switch=sw.name, phase=Phase.FAILED, message=str(exc),
                             error_kind=type(exc).__name__))

        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(self.switches)))) as ex:
            list(ex.map(one, self.switches.values()))
        return result

    def sync_all(self) -> FleetResult:
        result = FleetResult(reports={}, failures={})
        for sw in self.switches.values():
            try:
                result.reports[sw.name] = sw.sync()
            except P4rtError as exc:
                result.failures[sw.name] = exc
        return result

    def close(self) -> None:
        for sw in self.switches.values():
            sw.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
