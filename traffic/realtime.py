"""Real-time priority for the Python endpoint's loop: the host's emulated NIC.

A RoCE NIC acknowledges in hardware whatever the host's CPUs are doing, and its peers'
retransmission timers count on that.  The Python endpoint does the NIC's work in the
rank's own thread, so on a loaded host (load 15 on 2 cores) that thread waited
100-560 ms for a CPU while its peers' data sat in its socket, and their timers resent
packets it already had: no timer short of the host's worst scheduling delay tells a
descheduled peer from a lost packet, and one that long would make real losses slow to
recover.  So, as the native engine's thread (``traffic/native/tn_engine.c``), the
thread that runs the endpoint is put at ``SCHED_FIFO`` priority 1 while the endpoint is
open: best effort (needs ``CAP_SYS_NICE``), ``TN_ENGINE_RT=0`` opts out.

Unlike the native engine's thread, this thread runs Python, the application's work
included, so a watchdog bounds what it can take from the host: ``RLIMIT_RTTIME`` makes
the kernel send ``SIGXCPU`` once the thread has run :data:`WATCHDOG_S` of CPU time at
real-time priority without sleeping, and the handler puts it back to normal priority
for good (counted in ``demoted``).  The loop sleeps whenever nothing is due, which
resets that count, so a rank only loses the priority on a long CPU-bound stretch (a
huge message built at once, a rate beyond what Python can pace), where it would
otherwise keep the CPU from the host's other work.  Children do not inherit the
priority (``SCHED_RESET_ON_FORK``).  The kernel's own limit still applies on top
(``kernel.sched_rt_runtime_us``: 95 % of each CPU by default).

What the priority cannot do: when the host's real-time threads together want every CPU
(Python ranks that cost more CPU than the host has: ~0.45 of a core for each rank of a
40 Mbit/s ring all-reduce here, four of them on two cores), normal tasks starve, and the
kernel's guard against that (the fair server, 50 ms in every second for the starved
tasks) stops a real-time thread for 50-140 ms at a time (measured here with a spinning
SCHED_FIFO thread beside a busy normal one: one such pause every second).  That is
longer than the timer floor, so a peer's timer fires once; the spurious-timeout rule
(:mod:`traffic.requester`) then raises the peer's floor.  Keep real-time ranks within the
host's CPUs (the native engine's thread sleeps between packets) to avoid it.
"""
from __future__ import annotations

import contextlib
import os
import resource
import signal
import threading
from collections.abc import Iterator, Mapping
from types import FrameType

__all__ = ["ENV_VAR", "WATCHDOG_S", "RealtimePriority"]

ENV_VAR = "TN_ENGINE_RT"  # the native engine's opt-out too: "0" keeps normal priority
WATCHDOG_S = 0.2  # CPU time at real-time priority without a sleep before the demotion
_PRIORITY = 1


class RealtimePriority:
    """``SCHED_FIFO`` for the calling thread between :meth:`enter` and :meth:`leave`.

    Holds what it changed (scheduling policy, ``RLIMIT_RTTIME``, the ``SIGXCPU``
    handler) and restores it on :meth:`leave`.  ``granted``: :meth:`enter` got the
    priority; ``active``: the thread runs at it now; ``demoted``: how often the
    watchdog took it away (0 or 1).
    """

    def __init__(self) -> None:
        self.granted = False
        self.active = False
        self.demoted = 0
        self._entered = False
        self._old_policy: tuple[int, os.sched_param] | None = None
        self._old_limit: tuple[int, int] | None = None
        self._old_handler: object = None

    def enter(self, env: Mapping[str, str] | None = None) -> bool:
        """Try to run the calling thread at real-time priority; True when it does.

        Refused, leaving everything as it was: ``TN_ENGINE_RT=0``, a platform without
        ``SCHED_FIFO`` or ``RLIMIT_RTTIME``, a thread other than the main one (only it
        can catch the watchdog's signal), no permission.
        """
        env = os.environ if env is None else env
        if self._entered or env.get(ENV_VAR, "").startswith("0"):
            return False
        if (not hasattr(os, "sched_setscheduler") or not hasattr(resource, "RLIMIT_RTTIME")
                or threading.current_thread() is not threading.main_thread()):
            return False
        try:
            old_policy = (os.sched_getscheduler(0), os.sched_getparam(0))
            old_limit = resource.getrlimit(resource.RLIMIT_RTTIME)
        except OSError:
            return False
        if old_policy[0] != os.SCHED_OTHER:  # someone chose a policy already: keep it
            return False
        hard = old_limit[1]
        soft = int(WATCHDOG_S * 1e6)
        if hard != resource.RLIM_INFINITY and hard <= soft:
            return False  # the hard limit's SIGKILL would come before our SIGXCPU
        old_handler = signal.signal(signal.SIGXCPU, self._on_sigxcpu)
        try:
            resource.setrlimit(resource.RLIMIT_RTTIME, (soft, hard))
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(_PRIORITY))
        except OSError:  # no CAP_SYS_NICE (or a container that forbids it)
            try:
                resource.setrlimit(resource.RLIMIT_RTTIME, old_limit)
            except OSError:
                pass
            signal.signal(signal.SIGXCPU,
                          signal.SIG_DFL if old_handler is None else old_handler)
            return False
        self._old_policy, self._old_limit, self._old_handler = old_policy, old_limit, old_handler
        self._entered = self.granted = self.active = True
        return True

    def _on_sigxcpu(self, signum: int, frame: FrameType | None) -> None:
        """The watchdog: too long at real-time priority without a sleep."""
        self._demote()
        self.demoted += 1

    def _demote(self) -> None:
        if not self.active:
            return
        self.active = False
        assert self._old_policy is not None
        try:
            os.sched_setscheduler(0, self._old_policy[0], self._old_policy[1])
        except OSError:
            pass

    def leave(self) -> None:
        """Back to the thread's previous policy; limit and handler restored (idempotent).

        From the thread that entered (the main thread)."""
        if not self._entered:
            return
        self._entered = False
        self._demote()
        if self._old_limit is not None:
            try:
                resource.setrlimit(resource.RLIMIT_RTTIME, self._old_limit)
            except OSError:
                pass
        old = self._old_handler
        signal.signal(signal.SIGXCPU, signal.SIG_DFL if old is None else old)  # type: ignore[arg-type]

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Normal priority for a CPU-bound stretch the watchdog would otherwise end for
        good, then real-time again: the recovery policy's warm-up before a transfer
        (seconds of CPU, traffic.recovery.warm) would demote the rank's loop for the
        whole run (the runner warms inside this)."""
        was = self.active
        if was:
            self.leave()
        try:
            yield
        finally:
            if was:
                self.enter()

    def snapshot(self) -> dict:
        """``realtime``: 1 when the priority was granted (the native engine's counter of
        that name); ``realtime_demoted``: the watchdog took it away since."""
        return {"realtime": int(self.granted), "realtime_demoted": self.demoted}
