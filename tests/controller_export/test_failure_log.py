"""A server that stays down is reported once per minute with a count, not every retry."""
from __future__ import annotations

import logging

import pytest

from controller.export.exporter import _FailureLog


def test_repeated_failures_are_counted_not_repeated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="controller.export")
    fl = _FailureLog("influx", interval_s=60.0)
    for _ in range(12):          # a minute of retries every 5 s
        fl.failed(ConnectionRefusedError("refused"), 5.0)
    assert len(caplog.records) == 1 and "refused" in caplog.records[0].getMessage()
    fl.last_s = (fl.last_s or 0.0) - 61.0   # a minute later
    fl.failed(ConnectionRefusedError("refused"), 5.0)
    assert len(caplog.records) == 2 and "11 more failed attempts" in caplog.text
    fl.recovered()
    assert "works again after 13 failed attempts" in caplog.records[-1].getMessage()
