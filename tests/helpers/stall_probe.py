"""The machine's own stalls, measured beside a delay line, so a delay test can tell them
from the line's.

A delay line holds each frame until it is due; whether it sends it on time depends on
the machine giving it a CPU then.  On a shared VM the whole machine stops now and then
(a hypervisor that takes the vCPUs away: CI measured every frame of a 20 ms line
1-4 ms late for a second, and 10-14 ms stalls in another test of the same minute), and
no line can do better than the machine under it.  :class:`StallProbe` is a process at
the line's real-time priority on each CPU (a vCPU can stop alone) that sleeps 1 ms at a
time and records how late each wake-up came; a frame that was late while a probe was
late by as much was held up by the machine, not by the line.  The tests take off each
frame's lateness up to the largest stall a probe saw while the frame was in flight
(:meth:`StallProbe.line_delay_ms`), and keep their bounds.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from bisect import bisect_left
from typing import Self

#: the delay lines' real-time priority (mininet_topos/delayline.py, wan/native/delayline.c)
LINE_PRIORITY = 10
#: wake-ups later than this are recorded (a real-time sleeper's usual lateness: ~0.1 ms)
RECORD_LATE_MS = 0.3

_PROBE = textwrap.dedent(f"""
    import json, os, signal, sys, time
    # SIGINT ends the probe: a child inherits an ignored SIGINT (a test run started in
    # the background of a non-interactive shell has it ignored), so install it here
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.sched_setaffinity(0, {{int(sys.argv[1])}})
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({LINE_PRIORITY}))
        rt = True
    except OSError:
        rt = False
    stalls = []
    try:
        print("ready", flush=True)
        while True:
            t = time.time_ns()
            time.sleep(0.001)
            late = (time.time_ns() - t) / 1e6 - 1.0
            if late > {RECORD_LATE_MS}:
                stalls.append((t, late))
    except KeyboardInterrupt:
        pass
    print(json.dumps({{"realtime": rt, "stalls": stalls}}), flush=True)
""")


class StallProbe:
    """Context manager: ``with StallProbe() as probe: ...`` then ``probe.stall_ms(a, b)``
    (times in ``time.time_ns()``, the clock of ``SO_TIMESTAMPNS`` too)."""

    def __init__(self) -> None:
        self.realtime = False
        self.missing: list[str] = []
        """Probes whose record was lost (CPU, exit status, stderr): their stalls are not
        in :meth:`stall_ms`, which then reads low, never high."""
        self._starts: list[int] = []
        self._late_ms: list[float] = []
        self._procs: list[subprocess.Popen] = []

    def __enter__(self) -> Self:
        try:
            for cpu in sorted(os.sched_getaffinity(0)):
                p = subprocess.Popen([sys.executable, "-c", _PROBE, str(cpu)],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                self._procs.append(p)
                assert p.stdout is not None
                if p.stdout.readline().strip() != "ready":
                    raise RuntimeError(f"the stall probe on CPU {cpu} did not start")
        except BaseException:
            self._end(keep=False)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._end(keep=True)

    def _end(self, keep: bool) -> None:
        pairs: list[tuple[int, float]] = []
        rt = True
        self.missing = []
        for cpu, p in enumerate(self._procs):
            p.send_signal(signal.SIGINT)  # the probe prints what it saw
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.missing.append(f"probe {cpu}: no record within 10 s")
                continue
            lines = out.strip().splitlines()
            if keep and p.returncode == 0 and lines:
                got = json.loads(lines[-1])
                rt = rt and got["realtime"]
                pairs += [(t, late) for t, late in got["stalls"]]
            elif keep:
                self.missing.append(f"probe {cpu}: exit {p.returncode}, "
                                    f"stderr {err.strip()[-300:]!r}")
        self._procs = []
        self.realtime = rt
        pairs.sort()
        self._starts = [t for t, _ in pairs]
        self._late_ms = [late for _, late in pairs]

    def stall_ms(self, start_ns: int, end_ns: int) -> float:
        """The largest stall a probe saw in a sleep that overlapped [start, end], in ms."""
        longest_ns = int((1.0 + max(self._late_ms, default=0.0)) * 1e6)
        i = bisect_left(self._starts, start_ns - longest_ns)
        worst = 0.0
        for t, late in zip(self._starts[i:], self._late_ms[i:]):
            if t > end_ns:
                break
            if t + int((1.0 + late) * 1e6) >= start_ns:
                worst = max(worst, late)
        return worst

    def line_delay_ms(self, start_ns: int, end_ns: int, due_ms: float) -> float:
        """A frame's delay (``end - start``) less its lateness beyond ``due_ms`` (when it
        should have arrived at the latest), up to the largest stall seen meanwhile."""
        d = (end_ns - start_ns) / 1e6
        return d - min(max(0.0, d - due_ms), self.stall_ms(start_ns, end_ns))

    @property
    def stalls(self) -> int:
        """How many late wake-ups the probe recorded."""
        return len(self._late_ms)
