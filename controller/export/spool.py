"""A durable FIFO of batches on disk: what the exporter could not deliver yet.

Each batch is one file ``<seq:016d>.lp`` written to a temporary name, fsynced and
renamed, so a crash leaves either the whole batch or nothing.  Sequence numbers
continue from the files already present, so a restarted controller replays what
the previous run left behind, oldest first.
"""
from __future__ import annotations

import os
from pathlib import Path

from controller.export.errors import ConfigError

_SUFFIX = ".lp"


class Spool:
    """Ordered on-disk queue of byte batches."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.dir = Path(directory)
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"Spool: cannot create {self.dir}: {exc.strerror}") from None
        for tmp in self.dir.glob("*.tmp"):
            tmp.unlink(missing_ok=True)  # half-written by a crash: never acknowledged
        self._files = sorted(self.dir.glob("*" + _SUFFIX))
        self._next = int(self._files[-1].stem) + 1 if self._files else 0

    def __len__(self) -> int:
        return len(self._files)

    def append(self, body: bytes) -> Path:
        path = self.dir / f"{self._next:016d}{_SUFFIX}"
        tmp = path.with_suffix(".tmp")
        with tmp.open("wb") as fh:
            fh.write(body)
            fh.flush()
            os.fsync(fh.fileno())
        tmp.rename(path)
        self._next += 1
        self._files.append(path)
        return path

    def oldest(self) -> tuple[Path, bytes] | None:
        if not self._files:
            return None
        p = self._files[0]
        return p, p.read_bytes()

    def remove(self, path: Path) -> None:
        if self._files and self._files[0] == path:
            self._files.pop(0)
        else:
            self._files.remove(path)
        path.unlink(missing_ok=True)

    def bytes_queued(self) -> int:
        return sum(p.stat().st_size for p in self._files if p.exists())
