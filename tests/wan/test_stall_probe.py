"""The stall probe the delay tests use (tests/helpers/stall_probe.py) sees a real stall:
a real-time spin above the delay lines' priority on every CPU for 40 ms."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.helpers.stall_probe import LINE_PRIORITY, StallProbe

pytestmark = [pytest.mark.root]

_SPIN = f"""
import os, sys, time
os.sched_setaffinity(0, {{int(sys.argv[1])}})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param({LINE_PRIORITY + 10}))
end = time.monotonic() + 0.04
while time.monotonic() < end:
    pass
"""


def test_probe_sees_a_stall_of_every_cpu_and_nothing_before_it() -> None:
    with StallProbe() as probe:
        time.sleep(0.2)
        t0 = time.time_ns()
        spins = [subprocess.Popen([sys.executable, "-c", _SPIN, str(cpu)])
                 for cpu in sorted(os.sched_getaffinity(0))]
        for s in spins:
            assert s.wait(timeout=30) == 0
        t1 = time.time_ns()
        time.sleep(0.1)
    if not probe.realtime:
        pytest.skip("the probe could not get real-time priority (needs CAP_SYS_NICE)")
    assert not probe.missing, probe.missing
    assert probe.stall_ms(t0, t1) > 20.0, (probe.stall_ms(t0, t1), probe.stalls)
    # a quiet stretch reads (almost) nothing: a wake-up a few ms late on a loaded host
    # is the most the probe records there
    assert probe.stall_ms(t0 - 150_000_000, t0 - 50_000_000) < 10.0
    assert probe.stall_ms(t1 + 60_000_000, t1 + 90_000_000) < 10.0
