"""Fixtures of the INT data plane tests: the program is parsed once per session."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.helpers.p4int import compile_program, load_checked


@pytest.fixture(scope="session")
def checked_program() -> Any:
    return load_checked()


@pytest.fixture()
def make_program(checked_program: Any) -> Callable[[], Any]:
    """Factory of fresh compiled programs (one per switch: state is per program)."""
    return lambda: compile_program(checked_program)
