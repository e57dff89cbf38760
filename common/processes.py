"""Start and stop a private server process: one the project started itself, by PID.

Why one place: the test bed's switches and delay lines, the export tests' databases
and the soak benchmark's InfluxDB all start a program, wait until it answers, and
must stop it (SIGTERM, then SIGKILL after a grace period) even when a test fails; a
server that did not stop would keep its port and its files.  Only the process object
handed back is ever signalled: nothing is looked up or killed by name.
"""
from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


class ServerStartError(RuntimeError):
    """The process exited, or did not answer, before it was ready (message says which)."""


def spawn_logged(argv: Sequence[str], log_path: Path | str, **popen: Any) -> subprocess.Popen:
    """Start ``argv`` with stdout and stderr appended to ``log_path`` and stdin closed.

    The log file is handed to the child and closed here, so the child owns it.
    """
    with open(log_path, "ab") as log:
        return subprocess.Popen(list(argv), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **popen)


def log_tail(log_path: Path | str | None, chars: int = 2000) -> str:
    """The last ``chars`` characters of a log file ("" when there is none)."""
    if log_path is None:
        return ""
    try:
        return Path(log_path).read_text(errors="replace")[-chars:]
    except OSError:
        return ""


def wait_ready(proc: subprocess.Popen, ready: Callable[[], bool], *, timeout_s: float,
               what: str, log_path: Path | str | None = None, poll_s: float = 0.1,
               detail: Callable[[], str] | None = None) -> None:
    """Poll ``ready()`` until it is true; raise :class:`ServerStartError` naming ``what``
    (with the end of its log, or what ``detail()`` says) when the process exits first
    or ``timeout_s`` passes.  The process is left running on timeout: the caller stops it."""
    end = time.monotonic() + timeout_s
    while True:
        if proc.poll() is not None:
            said = detail() if detail is not None else log_tail(log_path)
            raise ServerStartError(f"{what} exited with status {proc.returncode}: {said}")
        if ready():
            return
        if time.monotonic() >= end:
            raise ServerStartError(f"{what} not ready after {timeout_s:g} s")
        time.sleep(poll_s)


def stop_process(proc: subprocess.Popen | None, *, grace_s: float = 10.0,
                 kill_wait_s: float = 5.0) -> int | None:
    """SIGTERM, wait up to ``grace_s``, then SIGKILL; return the exit status (None when
    there was no process).  A process that already ended is only reaped."""
    if proc is None:
        return None
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=kill_wait_s)
    return proc.returncode


class PrivateServer:
    """A server program on a loopback port with its files in ``workdir``.

    Subclasses give :meth:`argv` and :meth:`ready`; ``start()`` waits until ready,
    ``stop()`` ends it by PID, and it can be started again on the same port and data
    (how the export tests make an outage).
    """

    def __init__(self, workdir: Path, binary: str, port: int, *, what: str = "") -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workdir = workdir
        self.binary = binary
        self.port = port
        self.what = what or Path(binary).name
        self.proc: subprocess.Popen | None = None
        self.log_path = workdir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        raise NotImplementedError

    def start(self, timeout_s: float = 30.0) -> None:
        self.proc = spawn_logged(self.argv(), self.log_path)
        try:
            wait_ready(self.proc, self.ready, timeout_s=timeout_s,
                       what=f"{self.what} on {self.url}", log_path=self.log_path)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        stop_process(proc, grace_s=15.0)


def free_loopback_port() -> int:
    """A TCP port free on 127.0.0.1 now (the kernel's choice)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
