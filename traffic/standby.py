"""A standby rank: a process on a spare host that waits to take a moved rank over.

Why a process started idle: a data-parallel job keeps spare hosts with the job's
arguments ready, so moving a straggling rank costs no process start-up, only the QPs
(``traffic.rankmove`` sends the command).  The standby listens on its control socket
only; the first valid ``{"cmd": "move_rank", "rank": R, "to": <its address>,
"at_iter": N}`` makes it rank R from all-reduce iteration N on (the caller builds the
rank then).  Anything else is answered: progress queries with ``"standby": true``,
a malformed or foreign command with a counted rejection naming what is wrong.
"""
from __future__ import annotations

import select
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from traffic.control import ControlServer

__all__ = ["Activation", "Standby"]


@dataclass(slots=True, frozen=True)
class Activation:
    """The move this standby accepted, and where to confirm it."""

    rank: int
    at_iter: int
    reply_to: str | bytes | None


@dataclass(slots=True)
class Standby:
    """Waits on ``control_path`` for the move of a rank of an ``nranks`` ring of
    ``iterations`` all-reduce iterations to ``ip``."""

    control_path: str
    ip: str
    nranks: int
    iterations: int
    rejects: list[str] = field(default_factory=list)

    def wait(self, timeout_s: float, stop: Callable[[], bool] = lambda: False
             ) -> Activation | None:
        """The accepted move, or None at the timeout / on ``stop``; the control socket
        is closed either way (the rank's endpoint binds the same path next)."""
        srv = ControlServer(self.control_path)
        try:
            end = time.monotonic() + timeout_s
            while not stop() and (left := end - time.monotonic()) > 0:
                ready, _, _ = select.select([srv.sock], [], [], min(0.2, left))
                if not ready:
                    continue
                for cmds, errs, addr in srv.receive():
                    for e in errs:
                        self._reject(srv, addr, str(e))
                    for cmd in cmds:
                        got = self._command(srv, addr, cmd.app, cmd.stats)
                        if got is not None:
                            return got
            return None
        finally:
            srv.close()

    def _reject(self, srv: ControlServer, addr: str | bytes | None, msg: str) -> None:
        self.rejects.append(msg)
        srv.reply(addr, {"move_rank": {"status": "rejected", "standby": self.ip, "error": msg}})

    def _command(self, srv: ControlServer, addr: str | bytes | None, app: dict | None,
                 stats: bool) -> Activation | None:
        if stats or (app is not None and app["cmd"] == "collective"):
            srv.reply(addr, {"collective": {"standby": True, "host": self.ip, "iter": None}})
            return None
        if app is None:
            self._reject(srv, addr, f"standby {self.ip}: no QPs yet (only move_rank, "
                                    "collective and stats are answered)")
            return None
        rank, to, at = app["rank"], app["to"], app["at_iter"]
        where = f"standby {self.ip}: move_rank of rank {rank} to {to} at iteration {at}"
        if to != self.ip:
            self._reject(srv, addr, f"{where}: {to} is not this standby's address")
        elif not 0 <= rank < self.nranks:
            self._reject(srv, addr, f"{where}: rank {rank} outside the ring "
                                    f"0..{self.nranks - 1}")
        elif not 1 <= at < self.iterations:
            self._reject(srv, addr, f"{where}: iteration outside 1..{self.iterations - 1}")
        else:
            return Activation(rank=rank, at_iter=at, reply_to=addr)
        return None
