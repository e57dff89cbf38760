"""Reads PyTorch NCCL flight-recorder dumps into collective records.

A dump (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix + rank, pickled; or the JSON form)
is a dict with ``version``, ``pg_config`` (process group id -> name, desc, ranks),
``pg_status`` and ``entries``; each entry has ``record_id``, ``pg_id``,
``process_group`` (name, desc), ``collective_seq_id``, ``p2p_seq_id``,
``profiling_name`` ("nccl:all_reduce"), ``time_created_ns``, ``input_sizes``,
``input_dtypes``, ``state`` (scheduled, started, completed),
``time_discovered_started_ns``, ``time_discovered_completed_ns``, ``timeout_ms`` and
``is_p2p``.  Each entry becomes one whole-operation record: start = discovered start
(else creation), end = discovered completion when completed, else null.

Why a restricted unpickler: a pickle can run code when loaded; dumps are plain
containers, so any class reference in one is refused with a clear error.
"""
from __future__ import annotations

import io
import json
import math
import os
import pickle
import re
from pathlib import Path
from typing import Any

from traffic.collog.records import CollogError, CollRecord

__all__ = ["DTYPE_BYTES", "read_flight_recorder"]

DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8,
               "Short": 2, "Char": 1, "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1,
               "Float8_e5m2": 1, "ComplexFloat": 8, "ComplexDouble": 16}
_STATES = ("scheduled", "started", "completed")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise CollogError(f"flight-recorder dump refers to {module}.{name}: only plain "
                          "containers are accepted")


def _load(p: Path) -> dict[str, Any]:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CollogError(f"{p}: {e.strerror}") from None
    if raw[:1] in (b"{", b"[", b" ", b"\n"):
        try:
            data = json.loads(raw)
        except ValueError as e:
            raise CollogError(f"{p}: not JSON: {e}") from None
    else:
        try:
            data = _PlainUnpickler(io.BytesIO(raw)).load()
        except CollogError as e:
            raise CollogError(f"{p}: {e}") from None
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError) as e:
            raise CollogError(f"{p}: not a flight-recorder pickle: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("entries", []), list):
        raise CollogError(f"{p}: expected a dict with an 'entries' list")
    return data


def _bytes(entry: dict[str, Any], where: str) -> int:
    sizes, dtypes = entry.get("input_sizes") or [], entry.get("input_dtypes") or []
    total = 0
    for shape, dt in zip(sizes, dtypes):
        if not isinstance(shape, (list, tuple)) or dt not in DTYPE_BYTES:
            raise CollogError(f"{where}: input {shape!r} of dtype {dt!r} not understood")
        total += math.prod(int(x) for x in shape) * DTYPE_BYTES[dt]
    return total


def read_flight_recorder(path: str | os.PathLike[str], *, rank: int | None = None
                         ) -> list[CollRecord]:
    """Records of one dump; the rank comes from ``rank=``, the dump's ``rank`` key or
    the digits ending the file name (``trace_3``), in that order."""
    p = Path(path)
    data = _load(p)
    if rank is None:
        rank = data.get("rank") if isinstance(data.get("rank"), int) else None
    if rank is None:
        m = re.search(r"(\d+)(?:\.\w+)?$", p.name)
        if m is None:
            raise CollogError(f"{p}: rank unknown (no 'rank' key, no digits ending the name)")
        rank = int(m.group(1))
    pgs = data.get("pg_config") or {}
    out = []
    for i, e in enumerate(data["entries"]):
        where = f"{p} entry {i}"
        if not isinstance(e, dict):
            raise CollogError(f"{where}: not a dict")
        try:
            state = e["state"]
            if state not in _STATES:
                raise CollogError(f"{where}: state {state!r} not one of {_STATES}")
            pg = str(e.get("pg_id", ""))
            desc = (pgs.get(pg) or {}).get("desc") if isinstance(pgs, dict) else None
            pgname = e.get("process_group") or (pg, desc or "")
            comm = str(desc or pgname[1] or pgname[0] or pg)
            p2p = bool(e.get("is_p2p", False))
            seq = int(e["p2p_seq_id"] if p2p else e["collective_seq_id"])
            t0 = e.get("time_discovered_started_ns") or e["time_created_ns"]
            t1 = e.get("time_discovered_completed_ns") if state == "completed" else None
            op = str(e["profiling_name"]).split(":", 1)[-1].replace("_", "")
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CollogError(f"{where}: missing or bad field ({exc!r})") from None
        rec = CollRecord(rank=rank, comm=comm, op=op, seq=seq, bytes=_bytes(e, where),
                         start=int(t0) / 1e9, end=None if t1 is None else int(t1) / 1e9,
                         source="flight_recorder")
        rec.check(where)
        out.append(rec)
    return out
