"""Files other processes read while we write them.

Statistics files, the controller's state file, a delay line's parameters and a run's
summary are read by other processes at any moment (the test bed's pollers, ``controller
show``, a delay line on SIGHUP).  Each is written to a temporary file beside it and
renamed over it, so a reader sees the old file or the new one, never half of one.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["write_json_atomic", "write_text_atomic"]


def write_json_atomic(path: str | os.PathLike[str], data: Any, *, indent: int | None = 1,
                      default: Callable[[Any], Any] | None = None) -> None:
    """Replace `path` with `data` as JSON in one rename (its folder is created)."""
    write_text_atomic(path, json.dumps(data, indent=indent, default=default))


def write_text_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Replace `path` with `text` in one rename (its folder is created)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        os.fchmod(fd, 0o644)   # as open() would make it; mkstemp's 0600 hid results
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
