"""Waiting for a condition in tests that talk to real servers and sockets."""
from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(cond: Callable[[], object], timeout_s: float = 10.0, step_s: float = 0.05) -> bool:
    """Poll ``cond`` until it is true or ``timeout_s`` passes; its last answer, as a bool
    (tests assert on it, so a timeout fails where the condition is named)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step_s)
    return bool(cond())


def wait_or_fail(cond: Callable[[], object], timeout_s: float = 5.0, step_s: float = 0.02) -> None:
    """Poll ``cond`` until it is true; raise AssertionError when ``timeout_s`` passes first
    (for waits inside helpers, where there is no ``assert`` of the caller to name it)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(step_s)
    raise AssertionError("condition not reached in time")


def pump(*endpoints: object, done: Callable[[], object], timeout_s: float = 30.0) -> bool:
    """Step every endpoint (1 ms each) until ``done()`` is true or ``timeout_s`` passes:
    two endpoints of one test process, each with its own loop, driven in turn."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        for ep in endpoints:
            ep.step(0.001)  # type: ignore[attr-defined]
        if done():
            return True
    return False
