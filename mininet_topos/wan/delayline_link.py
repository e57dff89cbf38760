"""The delay line backend: a user-space process forwarding between two interfaces with
delay, jitter, rate and loss, for kernels without netem.

Two processes speak the same protocol (arguments, SIGUSR1 counters, SIGHUP reload,
SIGTERM): the Python line (:mod:`mininet_topos.delayline`, every parameter including
loss, about 100 Mbit/s) and the native one (``mininet_topos/wan/native/delayline.c``,
built by the bootstrap: delay, jitter, rate and queue at Gbit/s, no loss).  ``line``
picks: ``"python"``, ``"native"`` (refused when the line itself would have to drop), or
``"auto"``: native when it is built and a loss backend takes the loss (so the line
never has to), else Python, whose loss can also be changed live.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from common.files import write_json_atomic, write_text_atomic
from common.loss import LossModel
from common.processes import ServerStartError, stop_process, wait_ready

from ..delayline import WanError, WanParams
from .loss_backends import LossBackend
from .params import changed_params, params_from

_PROJECT_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 10.0
NATIVE_LINE = Path(__file__).resolve().parent / "native" / "bin" / "delayline"
LINES = ("auto", "native", "python")


def native_line_built() -> bool:
    """True when ``make -C mininet_topos/wan/native`` has built the native delay line."""
    return os.access(NATIVE_LINE, os.X_OK)


def native_params_text(params: WanParams) -> str:
    """``params`` as the native line's params file (key=value lines); it applies no loss."""
    if params.loss.kind != "none":
        raise WanError(f"native delay line: loss {params.loss.kind} asked for; it applies "
                       "no loss (use a loss backend or the Python line)")
    seed = "none" if params.seed is None else str(params.seed)
    return (f"delay_ms={params.delay_ms!r}\njitter_ms={params.jitter_ms!r}\n"
            f"rate_mbps={params.rate_mbps!r}\nqueue_pkts={params.queue_pkts}\n"
            f"reorder={int(params.reorder)}\nseed={seed}\nloss=none\n")


class WanLink:
    """A delay line process between ``a_iface`` and ``b_iface`` (see module docstring).

    ``realtime`` runs the delay line with SCHED_FIFO priority (best effort), so a busy
    machine delays its wake-ups less; it sleeps whenever nothing is due, so it only
    takes the CPU its traffic needs.  ``stats()`` reports how late sends were
    (``late_max_us``, ``late_over_1ms_pkts``) to show when the machine was too busy.
    """

    def __init__(self, a_iface: str, b_iface: str, *, netns: str | None = None,
                 params: WanParams | None = None, loss_backend: LossBackend | None = None,
                 realtime: bool = True, line: str = "auto", **shaping: Any) -> None:
        self.a_iface, self.b_iface, self.netns = a_iface, b_iface, netns
        if line not in LINES:
            raise WanError(f"WAN link {a_iface}-{b_iface}: line {line!r} is not one of "
                           f"{', '.join(LINES)}")
        self._line = line
        self._running_line: str | None = None
        self._params = params_from(self.name, params, shaping)
        self._loss_backend = loss_backend
        self._loss_handles: dict[str, Any] = {}
        self._realtime = realtime
        self._proc: subprocess.Popen | None = None
        self._dir: Path | None = None
        self._seq = -1

    @property
    def name(self) -> str:
        return f"{self.a_iface}-{self.b_iface}"

    # -- life cycle -------------------------------------------------------------------
    def _line_params(self) -> WanParams:
        """What the delay line applies (no loss when a backend takes it)."""
        if self._loss_backend is None:
            return self._params
        return dataclasses.replace(self._params, loss=LossModel.none())

    @property
    def line(self) -> str:
        """Which delay line runs (or will): ``"native"`` or ``"python"``."""
        if self._running_line is not None:
            return self._running_line
        if self._line == "auto":
            return "native" if self._loss_backend is not None and native_line_built() \
                else "python"
        return self._line

    def _write_params(self) -> None:
        assert self._dir is not None
        path = self._dir / "params.json"
        if self.line == "native":
            write_text_atomic(path, native_params_text(self._line_params()))
        else:
            write_json_atomic(path, self._line_params().to_dict(), indent=None)

    def start(self) -> WanLink:
        """Start the delay line and wait until it is forwarding."""
        if self._proc is not None:
            raise WanError(f"WAN link {self.name}: already started")
        if self.line == "native" and not native_line_built():
            raise WanError(f"WAN link {self.name}: the native delay line is not built "
                           f"({NATIVE_LINE}); run make -C mininet_topos/wan/native")
        self._dir = Path(tempfile.mkdtemp(prefix="wanlink-"))
        params_file, stats_file = self._dir / "params.json", self._dir / "stats.json"
        try:
            self._write_params()
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            raise
        self._running_line = self.line
        program = ([str(NATIVE_LINE)] if self.line == "native"
                   else [sys.executable, "-m", "mininet_topos.delayline"])
        argv = [*program, "--a", self.a_iface,
                "--b", self.b_iface, "--params", str(params_file), "--stats", str(stats_file)]
        if self._realtime:
            argv.append("--realtime")
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
        try:
            self._proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            proc = self._proc
            try:
                wait_ready(proc, stats_file.exists, timeout_s=START_TIMEOUT_S, poll_s=0.01,
                           what=f"WAN link {self.name}: delay line", detail=self._stderr)
            except ServerStartError as exc:
                raise WanError(str(exc)) from None
            self._seq = self._read_stats().get("seq", 0)
            if self._loss_backend is not None:
                # loss on the frames leaving each side of the delay line
                for direction, ifname in (("ab", self.b_iface), ("ba", self.a_iface)):
                    self._loss_handles[direction] = self._loss_backend.attach(
                        ifname, self.netns, self._params.loss, self._params.seed)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> dict[str, dict[str, int]]:
        """Stop the delay line (SIGTERM, then SIGKILL) and return its last counters."""
        last: dict[str, dict[str, int]] = {}
        for handle in self._loss_handles.values():
            with contextlib.suppress(Exception):
                handle.close()
        self._loss_handles.clear()
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, grace_s=5.0)
            if proc.stderr is not None:
                proc.stderr.close()
            with contextlib.suppress(Exception):
                last = self._directions(self._read_stats())
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self._running_line = None
        return last

    def __enter__(self) -> WanLink:  # noqa: PYI034 - returns the started link
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    # -- parameters and counters --------------------------------------------------------
    def params(self) -> WanParams:
        """The parameters the link applies (loss included, whoever applies it)."""
        return self._params

    def update(self, **changes: Any) -> WanParams:
        """Change parameters live (frames already in flight keep their schedule)."""
        new = changed_params(self._params, self.name, changes)
        if self._loss_backend is not None and new.loss != self._params.loss:
            raise WanError(f"WAN link {self.name}: loss is applied by the loss backend; "
                           "restart the link to change it")
        if self.line == "native" and self._loss_backend is None and new.loss.kind != "none":
            raise WanError(f"WAN link {self.name}: the native delay line applies no loss; "
                           "use line='python' or a loss backend")
        self._params = new
        if self._proc is not None:
            self._write_params()
            self._signal_and_wait(signal.SIGHUP)
        return new

    def applied_params(self) -> WanParams:
        """The parameters the running delay line reports it applies (read back from the
        process itself; without loss when a loss backend takes it)."""
        if self._proc is None:
            raise WanError(f"WAN link {self.name}: not running")
        return WanParams.from_dict(self._signal_and_wait(signal.SIGUSR1)["params"])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        where = f" in {self.netns}" if self.netns else ""
        return f"<WanLink {self.name}{where} {state} ({self.line} line) {self._params}>"

    def stats(self) -> dict[str, dict[str, int]]:
        """Counters per direction, ``"ab"`` (a_iface to b_iface) and ``"ba"``."""
        if self._proc is None:
            raise WanError(f"WAN link {self.name}: not running")
        out = self._directions(self._signal_and_wait(signal.SIGUSR1))
        for direction, handle in self._loss_handles.items():
            counters = getattr(handle, "counters", None)
            if counters is not None and direction in out:
                out[direction]["lost"] = int(counters().dropped)
        return out

    @staticmethod
    def _directions(raw: dict[str, Any]) -> dict[str, dict[str, int]]:
        return {d: raw[d] for d in ("ab", "ba") if d in raw}

    def _read_stats(self) -> dict[str, Any]:
        assert self._dir is not None
        return json.loads((self._dir / "stats.json").read_text())

    def _signal_and_wait(self, sig: signal.Signals, timeout: float = 3.0) -> dict[str, Any]:
        assert self._proc is not None
        target = self._seq + 1
        # signal the delay line itself: with a namespace, our child is "ip netns exec",
        # which execs into python, so the PID is the same process
        self._proc.send_signal(sig)
        answer: dict[str, Any] = {}

        def answered() -> bool:
            with contextlib.suppress(ValueError, FileNotFoundError):
                raw = self._read_stats()
                if raw.get("seq", 0) >= target:
                    answer.update(raw)
                    return True
            return False

        try:
            wait_ready(self._proc, answered, timeout_s=timeout, poll_s=0.005,
                       what=f"WAN link {self.name}: delay line", detail=self._stderr)
        except ServerStartError as exc:
            if self._proc.poll() is not None:
                raise WanError(str(exc)) from None
            raise WanError(f"WAN link {self.name}: delay line did not answer "
                           f"{sig.name} within {timeout:g} s") from None
        self._seq = answer["seq"]
        return answer

    def _stderr(self) -> str:
        """What the (exited) delay line wrote to its stderr pipe."""
        proc = self._proc
        if proc is None or proc.stderr is None:
            return ""
        return proc.stderr.read().decode(errors="replace").strip()
