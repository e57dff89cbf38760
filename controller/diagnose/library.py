"""Library logs as the diagnosis takes them: NCCL logs and flight-recorder dumps named
on the command line, the rank map, the account of every file.

Why here and not in the CLI: the tests, the corpus and any other caller load library
logs the same way the ``controller diagnose`` command does.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, timedelta, timezone, tzinfo
from pathlib import Path

from traffic.collog.flight_recorder import read_flight_recorder
from traffic.collog.nccl import read_nccl
from traffic.collog.records import CollogError
from traffic.collog.result import ReadResult

__all__ = ["LibraryLogs", "file_rank", "parse_rank_map", "parse_tz", "read_library_logs"]


@dataclass(slots=True)
class LibraryLogs:
    total: ReadResult = field(default_factory=ReadResult)
    accounts: list[tuple[str, ReadResult]] = field(default_factory=list)   # per file

    def as_dicts(self) -> list[dict]:
        return [{"file": name, "lines": r.lines, "read": dict(r.read),
                 "rejected": len(r.rejected), "reasons": dict(r.reasons),
                 "examples": r.rejected[:3]} for name, r in self.accounts]


def file_rank(spec: str) -> tuple[Path, int | None]:
    """``FILE`` or ``FILE@RANK`` (a file whose own name ends so is taken whole)."""
    path, at, rank = spec.rpartition("@")
    if at and rank.isdigit() and not Path(spec).exists():
        return Path(path), int(rank)
    return Path(spec), None


def parse_rank_map(specs: list[str]) -> dict[int, tuple[str, str]]:
    """``["0=node1:4321,1=node2"]`` -> {0: ("node1", "4321"), 1: ("node2", "")}."""
    out: dict[int, tuple[str, str]] = {}
    for spec in specs:
        for item in filter(None, (x.strip() for x in spec.split(","))):
            rank, eq, where = item.partition("=")
            host, pid = where, ""
            if where.count(":") == 1:
                host, _, pid = where.partition(":")
            if not eq or not rank.strip().isdigit() or not host or (pid and not pid.isdigit()):
                raise CollogError(f"--rank-map {item!r}: expected RANK=HOST or RANK=HOST:PID")
            out[int(rank)] = (host, pid)
    return out


def parse_tz(text: str | None) -> tzinfo | None:
    """``UTC`` or ``+08:00`` / ``-5``; None: this machine's local time."""
    if text is None:
        return None
    if text.upper() in ("UTC", "Z"):
        return UTC
    sign, rest = text[:1], text[1:]
    hh, _, mm = rest.partition(":")
    if sign not in ("+", "-") or not hh.isdigit() or (mm and not mm.isdigit()) or int(hh) > 23:
        raise CollogError(f"--log-tz {text!r}: expected UTC or +HH:MM / -HH:MM")
    off = timedelta(hours=int(hh), minutes=int(mm or 0))
    return timezone(-off if sign == "-" else off)


def read_library_logs(nccl: list[str], flight_recorder: list[str], *,
                      rank_map: list[str] | None = None, tz: str | None = None) -> LibraryLogs:
    """Every NCCL log (``FILE[@RANK]``) and flight-recorder dump (``FILE[@RANK]`` or a
    directory of dumps) read, with the account of each file.  Raises
    :class:`CollogError` for a file that cannot be read at all or a bad option."""
    rmap = parse_rank_map(rank_map or [])
    by_proc = {f"{h}:{pid}" if pid else h: r for r, (h, pid) in rmap.items()}
    zone = parse_tz(tz)
    out = LibraryLogs()
    for spec in nccl:
        path, rank = file_rank(spec)
        res = read_nccl(path, rank=rank, rank_map=by_proc, tz=zone)
        out.accounts.append((str(path), res))
        out.total.extend(res)
    for spec in flight_recorder:
        path, rank = file_rank(spec)
        try:
            files = (sorted(q for q in path.iterdir() if q.is_file()) if path.is_dir()
                     else [path])
        except OSError as e:
            raise CollogError(f"{path}: {e.strerror}") from None
        for f in files:
            res = read_flight_recorder(f, rank=rank)
            for rec in res.records:
                rec.host = rec.host or rmap.get(rec.rank, ("", ""))[0]
            out.accounts.append((os.fspath(f), res))
            out.total.extend(res)
    return out
