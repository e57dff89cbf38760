"""`python -m bench`: help, and a script's options reach it without `--`."""
from __future__ import annotations

import subprocess

import pytest

import bench.__main__ as bm


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    seen: list[list[str]] = []
    monkeypatch.setattr(subprocess, "call", lambda argv, **kw: seen.append(argv[2:]) or 0)
    return seen


def test_help_names_the_scripts(calls: list[list[str]], capsys: pytest.CaptureFixture) -> None:
    assert bm.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "bench_traffic" in out and "soak" in out and not calls


def test_soak_gets_its_minutes(calls: list[list[str]]) -> None:
    assert bm.main(["soak", "--minutes", "10"]) == 0
    assert calls == [["bench.soak", "--minutes", "10"]]
    calls.clear()
    assert bm.main(["soak", "--", "--minutes", "3"]) == 0
    assert calls == [["bench.soak", "--minutes", "3"]]


def test_an_option_without_a_script_is_an_error(calls: list[list[str]],
                                                capsys: pytest.CaptureFixture) -> None:
    assert bm.main(["--rounds", "3"]) == 2
    assert "options belong to one script" in capsys.readouterr().err and not calls
