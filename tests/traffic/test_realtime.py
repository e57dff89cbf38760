"""The Python endpoint's real-time priority (traffic.realtime): granted, refused, bounded.

Each case runs in a child process: the priority, ``RLIMIT_RTTIME`` and the ``SIGXCPU``
handler belong to the process (and its main thread), not to pytest's.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _child(code: str, **env: str) -> dict:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter."""
    e = {k: v for k, v in os.environ.items() if k != "TN_ENGINE_RT"}
    e.update(PYTHONPATH=str(ROOT), **env)
    p = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, cwd=ROOT, env=e, timeout=120, check=False)
    assert p.returncode == 0, p.stderr[-2000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


_PRELUDE = """
    import json, os, resource, signal, subprocess, sys, threading, time
    from traffic.realtime import RealtimePriority, WATCHDOG_S
    def policy():
        return os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK
"""


def _granted_or_skip(r: dict) -> None:
    if not r["granted"]:
        pytest.skip("this process cannot get real-time priority (needs CAP_SYS_NICE)")


def test_enter_gives_fifo_and_leave_restores_everything() -> None:
    r = _child(_PRELUDE + """
    before = (policy(), resource.getrlimit(resource.RLIMIT_RTTIME), signal.getsignal(signal.SIGXCPU))
    rt = RealtimePriority()
    granted = rt.enter()
    during = (policy(), resource.getrlimit(resource.RLIMIT_RTTIME)[0])
    child = subprocess.run([sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"],
                           capture_output=True, text=True).stdout.strip()
    rt.leave(); rt.leave()
    after = (policy(), resource.getrlimit(resource.RLIMIT_RTTIME), signal.getsignal(signal.SIGXCPU))
    print(json.dumps({"granted": granted, "during": during, "child": int(child),
                      "restored": after == before, "snap": rt.snapshot(),
                      "fifo": os.SCHED_FIFO, "other": os.SCHED_OTHER,
                      "soft": int(WATCHDOG_S * 1e6)}))
    """)
    _granted_or_skip(r)
    assert r["during"] == [r["fifo"], r["soft"]]
    assert r["child"] == r["other"], "a child process must not inherit the priority"
    assert r["restored"]
    assert r["snap"] == {"realtime": 1, "realtime_demoted": 0}


def test_opt_out_and_other_threads_keep_normal_priority() -> None:
    r = _child(_PRELUDE + """
    out = {}
    rt = RealtimePriority()
    out["opt_out"] = rt.enter(env={"TN_ENGINE_RT": "0"})
    box = []
    t = threading.Thread(target=lambda: box.append(RealtimePriority().enter()))
    t.start(); t.join()
    out["thread"] = box[0]
    out["policy"] = policy() == os.SCHED_OTHER
    out["snap"] = rt.snapshot()
    print(json.dumps(out))
    """)
    assert r == {"opt_out": False, "thread": False, "policy": True,
                 "snap": {"realtime": 0, "realtime_demoted": 0}}


def test_watchdog_demotes_a_cpu_bound_stretch() -> None:
    # a loop that never sleeps: the kernel's SIGXCPU after WATCHDOG_S of CPU time, and
    # the handler puts the thread back to normal priority (the loop gives up after
    # 10 x WATCHDOG_S of CPU, which only a missing watchdog would reach)
    r = _child(_PRELUDE + """
    rt = RealtimePriority()
    granted = rt.enter()
    t0 = time.process_time()
    while granted and rt.active and time.process_time() - t0 < 10 * WATCHDOG_S:
        pass
    out = {"granted": granted, "active": rt.active, "demoted": rt.demoted,
           "normal": policy() == os.SCHED_OTHER}
    rt.leave()
    print(json.dumps(out))
    """)
    _granted_or_skip(r)
    assert r == {"granted": True, "active": False, "demoted": 1, "normal": True}


def test_endpoint_with_realtime_reports_it_and_drops_it_on_close() -> None:
    r = _child(_PRELUDE + """
    from traffic.endpoint import Endpoint, EndpointConfig
    ep = Endpoint(EndpointConfig(ip="127.0.0.1", port=0, realtime=True))
    eng = ep.stats(compact=True)["engine"]
    ep.close()
    plain = Endpoint(EndpointConfig(ip="127.0.0.1", port=0))
    eng_plain = plain.stats(compact=True)["engine"]
    plain.close()
    print(json.dumps({"granted": bool(eng["realtime"]), "eng": eng, "plain": eng_plain,
                      "normal": policy() == os.SCHED_OTHER}))
    """)
    _granted_or_skip(r)
    assert r["eng"] == {"name": "python", "realtime": 1, "realtime_demoted": 0}
    assert r["plain"] == {"name": "python", "realtime": 0, "realtime_demoted": 0}
    assert r["normal"]


def test_paused_runs_a_cpu_bound_stretch_at_normal_priority_and_takes_it_back() -> None:
    """A stretch longer than the watchdog inside ``paused()`` leaves the priority with
    the thread (the recovery policy's warm-up); without it the watchdog takes it."""
    r = _child(_PRELUDE + """
    rt = RealtimePriority()
    granted = rt.enter()
    def burn(s):
        end = time.thread_time() + s
        while time.thread_time() < end:
            pass
    with rt.paused():
        inside = policy()
        burn(WATCHDOG_S * 2)
    kept = (rt.active, rt.demoted, policy())
    burn(WATCHDOG_S * 2)
    print(json.dumps({"granted": granted, "inside": inside, "kept": kept,
                      "after": [rt.active, rt.demoted], "fifo": os.SCHED_FIFO,
                      "other": os.SCHED_OTHER}))
    """)
    _granted_or_skip(r)
    assert r["inside"] == r["other"]
    assert r["kept"] == [True, 0, r["fifo"]]
    assert r["after"] == [False, 1]  # the same stretch outside: demoted


def test_native_driver_is_realtime_but_the_applications_work_is_not() -> None:
    """The native endpoint's driver thread posts and reaps at real-time priority and
    does the application's bulk work (``app_work``: reductions) at normal
    priority; the Python endpoint's loop keeps its priority there (it is the NIC)."""
    from traffic.native_endpoint import engine_available
    if not engine_available():
        pytest.skip("native engine not built")
    r = _child(_PRELUDE + """
    from traffic.endpoint import Endpoint, EndpointConfig
    from traffic.native_endpoint import NativeEndpoint
    ep = NativeEndpoint(EndpointConfig(ip="127.0.0.1", port=0, realtime=True))
    ep.step(0.001)
    driving = policy()
    with ep.app_work():
        working = policy()
    after = policy()
    eng = ep.engine_info()
    ep.close()
    closed = policy()
    py = Endpoint(EndpointConfig(ip="127.0.0.1", port=0, realtime=True))
    with py.app_work():
        py_working = policy()
    py.close()
    print(json.dumps({"granted": bool(eng["driver_realtime"]), "driving": driving,
                      "working": working, "after": after, "closed": closed,
                      "demoted": eng["driver_realtime_demoted"], "py_working": py_working,
                      "fifo": os.SCHED_FIFO, "other": os.SCHED_OTHER}))
    """)
    _granted_or_skip(r)
    assert (r["driving"], r["working"], r["after"]) == (r["fifo"], r["other"], r["fifo"])
    assert (r["closed"], r["demoted"]) == (r["other"], 0)
    assert r["py_working"] == r["fifo"]
