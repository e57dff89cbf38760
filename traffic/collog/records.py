"""One collective-log record (a JSON line) and the readers of log files.

A record is one transfer of one collective step seen by one rank: a send (the rank's
requester QP, start = posted, end = acknowledged) or a receive (its responder QP,
start = first packet, end = message delivered).  FORMAT.md lists the fields.
"""
from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from traffic.errors import ConfigError

__all__ = ["FORMAT_VERSION", "CollRecord", "CollogError", "read_log", "read_logs"]

FORMAT_VERSION = 1
DIRECTIONS = ("send", "recv", "op")


class CollogError(ConfigError):
    """A log line or file that is not a valid collective log (names file and line)."""


@dataclass(slots=True, kw_only=True)
class CollRecord:
    """One transfer (or, from library logs without transfers, one whole operation)."""

    rank: int
    comm: str                    # communicator / process group
    op: str                      # allreduce, alltoall, incast, kvcache, p2p, ...
    seq: int                     # operation sequence number within the communicator
    step: int = 0                # step within the operation (ring all-reduce: 0..2(N-1)-1)
    dir: str = "op"              # send | recv | op (a whole operation, no peer)
    peer: int | None = None      # the other rank of a send / recv
    bytes: int = 0
    qpn: int | None = None
    start: float = 0.0           # Unix seconds
    end: float | None = None     # Unix seconds; None: not finished (hung or cut off)
    retx: int = 0                # packets retransmitted for this transfer
    timeouts: int = 0            # retransmission timeouts of the QP during the transfer
    rate_changes: list[list[float]] = field(default_factory=list)  # [[unix_s, bps], ...]
    source: str = "testbed"      # testbed | nccl | flight_recorder
    host: str = ""               # address or host name of the rank
    dtype: str = ""              # element type (library logs: "Float", "float32", ...)
    state: str = ""              # library logs: scheduled | started | completed | "" (unknown)
    srtt: float | None = None    # send: the QP's smoothed RTT (s) as it was acknowledged

    @property
    def duration(self) -> float | None:
        return None if self.end is None else self.end - self.start

    def to_json(self) -> str:
        d = asdict(self)
        d["v"] = FORMAT_VERSION
        return json.dumps(d, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: Any, where: str) -> CollRecord:
        if not isinstance(d, dict):
            raise CollogError(f"{where}: expected a JSON object")
        if d.get("v", FORMAT_VERSION) != FORMAT_VERSION:
            raise CollogError(f"{where}: format version {d.get('v')!r}, expected {FORMAT_VERSION}")
        known = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
        extra = set(d) - known - {"v"}
        if extra:
            raise CollogError(f"{where}: unknown field(s) {sorted(extra)}")
        for name in ("rank", "comm", "op", "seq"):
            if name not in d:
                raise CollogError(f"{where}: missing field {name!r}")
        kw = {k: v for k, v in d.items() if k != "v"}
        try:
            rec = cls(**kw)
        except TypeError as e:
            raise CollogError(f"{where}: {e}") from None
        rec.check(where)
        return rec

    def check(self, where: str) -> None:
        for name in ("rank", "seq", "step", "bytes", "retx", "timeouts"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise CollogError(f"{where}: {name}={v!r} must be an integer >= 0")
        if self.dir not in DIRECTIONS:
            raise CollogError(f"{where}: dir={self.dir!r} not one of {DIRECTIONS}")
        for name in ("start", "end"):
            v = getattr(self, name)
            if (v is None and name == "start") or (v is not None and (
                    not isinstance(v, (int, float)) or isinstance(v, bool)
                    or not math.isfinite(v))):
                raise CollogError(f"{where}: {name}={v!r} must be a finite number")
        v = self.srtt
        if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)
                              or not math.isfinite(v) or v < 0):
            raise CollogError(f"{where}: srtt={v!r} must be a number >= 0 or null")
        for name in ("peer", "qpn"):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                raise CollogError(f"{where}: {name}={v!r} must be an integer >= 0 or null")
        rc = self.rate_changes
        if not isinstance(rc, list) or not all(
                isinstance(x, (list, tuple)) and len(x) == 2 and all(
                    isinstance(y, (int, float)) and not isinstance(y, bool)
                    and math.isfinite(y) for y in x) for x in rc):
            raise CollogError(f"{where}: rate_changes must be a list of [unix_s, bps]")
        if self.end is not None and self.end < self.start:
            raise CollogError(f"{where}: end {self.end} before start {self.start}")
        for name in ("comm", "op", "host", "dtype", "state", "source"):
            if not isinstance(getattr(self, name), str):
                raise CollogError(f"{where}: {name} must be a string")


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    with path.open(encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            if line.strip():
                yield n, line


def read_log(path: str | os.PathLike[str]) -> list[CollRecord]:
    """Every record of one JSON-lines log file; a bad line raises with file:line."""
    p = Path(path)
    out = []
    try:
        for n, line in _lines(p):
            where = f"{p}:{n}"
            try:
                d = json.loads(line)
            except json.JSONDecodeError as e:
                raise CollogError(f"{where}: not JSON ({e.msg})") from None
            except RecursionError:
                raise CollogError(f"{where}: not JSON (nested too deep)") from None
            out.append(CollRecord.from_dict(d, where))
    except OSError as e:
        raise CollogError(f"{p}: {e.strerror}") from None
    return out


def log_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files named directly, and ``*.jsonl`` (rotated ``*.jsonl.N`` too) in directories."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(q for q in p.iterdir()
                          if q.name.endswith(".jsonl") or ".jsonl." in q.name)
        else:
            out.append(p)
    return out


def read_logs(paths: Iterable[str | os.PathLike[str]]) -> list[CollRecord]:
    """Records of every log file (rotated parts included), sorted by start time."""
    recs = [r for f in log_files(paths) for r in read_log(f)]
    recs.sort(key=lambda r: (r.start, r.rank))
    return recs
