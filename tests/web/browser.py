"""Headless Chromium (Debian's package) driven by Playwright, for the page's tests.

Playwright's own browser download is never used (this machine has no internet):
Playwright drives /usr/bin/chromium with the flags a sandboxed root session needs.
Screenshots go to ``$WEB_ARTIFACTS`` (default ``build/artifacts/web`` in the checkout)
and are kept after the run.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def artifacts() -> Path:
    d = Path(os.environ.get("WEB_ARTIFACTS") or ROOT / "build" / "artifacts" / "web")
    d.mkdir(parents=True, exist_ok=True)
    return d


def missing() -> str | None:
    if not Path(CHROMIUM).exists():
        return "needs Debian's chromium (scripts/bootstrap.sh installs it)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "needs the playwright package (pip install -e .[dev])"
    return None


@contextmanager
def page() -> Iterator[Any]:
    """A fresh browser (its own --user-data-dir) and one page."""
    reason = missing()
    if reason:
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright
    profile = tempfile.mkdtemp(prefix="web-test-profile-")
    try:
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(
                profile, executable_path=CHROMIUM, headless=True, args=FLAGS,
                viewport={"width": 1400, "height": 1300})
            try:
                pg = ctx.new_page()
                errors: list[str] = []
                pg.on("pageerror", lambda e: errors.append(str(e)))
                pg.errors = errors   # type: ignore[attr-defined]
                yield pg
            finally:
                ctx.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
