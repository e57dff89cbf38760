"""Bounded per-rank JSON-lines writer (size-capped, rotated with the standard library).

Why rotation and not truncation: a long training job must not fill the disk, and the
newest records matter most for a diagnosis; ``logging.handlers.RotatingFileHandler``
keeps ``rank<N>.jsonl`` below ``max_bytes`` and the ``backups`` older parts as
``rank<N>.jsonl.1`` ... (the reader takes them all).  Written records are counted, so
a summary says how many were written and how many rotated away.
"""
from __future__ import annotations

import logging
import logging.handlers
import os
from pathlib import Path
from typing import Self

from traffic.collog.records import CollogError, CollRecord

__all__ = ["DEFAULT_BACKUPS", "DEFAULT_MAX_BYTES", "CollectiveLogWriter", "rank_log_path"]

DEFAULT_MAX_BYTES = 8 << 20
DEFAULT_BACKUPS = 2


def rank_log_path(directory: str | os.PathLike[str], rank: int) -> Path:
    return Path(directory) / f"rank{rank}.jsonl"


class CollectiveLogWriter:
    """Appends records of one rank to ``DIR/rank<N>.jsonl`` (bounded, rotated)."""

    def __init__(self, directory: str | os.PathLike[str], rank: int, *,
                 max_bytes: int = DEFAULT_MAX_BYTES, backups: int = DEFAULT_BACKUPS):
        if max_bytes < 4096:
            raise CollogError(f"collective log: max_bytes={max_bytes} below 4096")
        if not 0 <= backups <= 100:
            raise CollogError(f"collective log: backups={backups} outside 0..100")
        self.path = rank_log_path(directory, rank)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise CollogError(f"collective log directory {self.path.parent}: {e.strerror}"
                              ) from None
        self.rank = rank
        self.records = 0
        self._handler = logging.handlers.RotatingFileHandler(
            self.path, maxBytes=max_bytes, backupCount=max(backups, 1) if backups else 0,
            encoding="utf-8")
        if backups == 0:  # RotatingFileHandler only rotates with backups: cap by rewrite
            self._handler.backupCount = 1
        self._handler.setFormatter(logging.Formatter("%(message)s"))
        self._keep = backups

    def write(self, rec: CollRecord) -> None:
        rec.check(f"{self.path} record {self.records + 1}")
        self._handler.emit(logging.makeLogRecord({"msg": rec.to_json(), "levelno": 20,
                                                  "levelname": "INFO"}))
        self.records += 1
        if self._keep == 0:
            Path(f"{self.path}.1").unlink(missing_ok=True)

    def close(self) -> None:
        self._handler.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
