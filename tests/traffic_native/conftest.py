"""Native engine tests: build ``traffic/native`` first (make rebuilds only what changed).

Why here and not only in scripts/bootstrap.sh: a developer who edits a C file and runs
pytest gets the tests of the new code, not of a stale library.
"""
from __future__ import annotations

import shutil
import subprocess

import pytest

from traffic.native import NATIVE_DIR


@pytest.fixture(scope="session", autouse=True)
def native_library() -> None:
    if shutil.which("make") is None or shutil.which("gcc") is None:
        pytest.skip("needs make and gcc to build traffic/native (scripts/bootstrap.sh installs them)")
    r = subprocess.run(["make", "-s", "-C", str(NATIVE_DIR)], capture_output=True, text=True,
                       timeout=600, check=False)
    if r.returncode != 0:
        pytest.fail(f"make -C {NATIVE_DIR} failed:\n{r.stdout}{r.stderr}")
