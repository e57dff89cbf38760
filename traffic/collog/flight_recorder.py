"""Reads PyTorch flight-recorder dumps (2.4+; NCCL and gloo; pickle or JSON).

A dump (``TORCH_NCCL_DEBUG_INFO_TEMP_FILE`` prefix + rank, or what
``torch._C._distributed_c10d._dump_fr_trace`` / ``_dump_fr_trace_json`` return) is a
dict with ``version``, ``pg_config`` (process group -> name, desc, ``ranks``: the
members, as a string ``"[0, 1]"``), ``pg_status`` (last enqueued / started / completed
sequence number per group) and ``entries``; PyTorch leaves ``entries`` out when the
ring is empty (a rank that never entered a collective).  Each entry has
``collective_seq_id`` / ``p2p_seq_id`` (``seq_id`` before 2.4), ``profiling_name`` (``nccl:all_reduce``,
``gloo:broadcast``), ``process_group`` (name, desc), ``input_sizes``, ``input_dtypes``,
``state`` (scheduled, started, completed), ``time_created_ns``,
``time_discovered_started_ns`` / ``_completed_ns`` (null in pickles, 0 in JSON when
unknown) and ``retired``.  Each entry becomes one whole-operation record: start =
discovered start (else creation), end = discovered completion when completed.

Gloo: the recorder never updates a gloo entry's state (it stays "scheduled" even when
retired, and ``retired`` is set by a timeout too), so gloo records carry state ""
(unknown) and no end: what they tell is which collective each rank reached.

Why a restricted unpickler: a pickle can run code when loaded; dumps are plain
containers, so any class reference in one is refused with a clear error.
"""
from __future__ import annotations

import ast
import io
import json
import math
import os
import pickle
import re
from pathlib import Path
from typing import Any

from traffic.collog.records import CollogError, CollRecord
from traffic.collog.result import ReadResult

__all__ = ["DTYPE_BYTES", "STATES", "read_flight_recorder"]

DTYPE_BYTES = {"Float": 4, "Double": 8, "Half": 2, "BFloat16": 2, "Int": 4, "Long": 8,
               "Short": 2, "Char": 1, "Byte": 1, "Bool": 1, "Float8_e4m3fn": 1,
               "Float8_e5m2": 1, "Float8_e4m3fnuz": 1, "Float8_e5m2fnuz": 1,
               "ComplexFloat": 8, "ComplexDouble": 16, "ComplexHalf": 4, "UInt16": 2,
               "UInt32": 4, "UInt64": 8}
STATES = ("scheduled", "started", "completed")


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise CollogError(f"flight-recorder dump refers to {module}.{name}: only plain "
                          "containers are accepted")


def _load(p: Path) -> dict[str, Any]:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CollogError(f"{p}: {e.strerror}") from None
    if raw.lstrip()[:1] in (b"{", b"["):
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise CollogError(f"{p}: not JSON: {e}") from None
    else:
        try:
            data = _PlainUnpickler(io.BytesIO(raw)).load()
        except CollogError as e:
            raise CollogError(f"{p}: {e}") from None
        except Exception as e:  # noqa: BLE001 - any malformed pickle: one clear error
            raise CollogError(f"{p}: not a flight-recorder dump (neither JSON nor a "
                              f"pickle: {type(e).__name__})") from None
    if not isinstance(data, dict):
        raise CollogError(f"{p}: not a flight-recorder dump (expected a dict, got "
                          f"{type(data).__name__})")
    if not isinstance(data.get("entries", []), list):
        raise CollogError(f"{p}: 'entries' is not a list")
    return data


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return int(v)


def _ns(v: Any) -> int | None:
    """A time in ns since the epoch, within what an int64 holds (else unknown)."""
    t = _int(v)
    return t if t is not None and 0 < t < 2**63 else None


def _members(data: dict[str, Any]) -> dict[str, list[int]]:
    """Process group (name and desc both) -> member ranks, from ``pg_config``."""
    out: dict[str, list[int]] = {}
    pgs = data.get("pg_config")
    if not isinstance(pgs, dict):
        return out
    for key, cfg in pgs.items():
        if not isinstance(cfg, dict):
            continue
        ranks = cfg.get("ranks")
        if isinstance(ranks, str):
            try:
                ranks = ast.literal_eval(ranks)
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
        if not isinstance(ranks, (list, tuple)) or not ranks or not all(
                isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ranks):
            continue
        for name in (key, cfg.get("name"), cfg.get("desc")):
            if isinstance(name, str) and name:
                out[name] = list(ranks)
        if len(pgs) == 1:   # the only group: the default one, whatever it is called
            out.setdefault("default_pg", list(ranks))
    return out


def _entry(e: Any, rank: int, host: str, where: str, out: ReadResult) -> CollRecord | None:
    if not isinstance(e, dict):
        out.reject(where, "entry not a dict")
        return None
    if "collective_seq_id" not in e and "seq_id" in e:   # dumps before PyTorch 2.4
        e = {**e, "collective_seq_id": e["seq_id"]}
    for k in ("profiling_name", "collective_seq_id"):
        if k not in e:
            out.reject(where, "entry without a field", k)
            return None
    name = e["profiling_name"]
    if not isinstance(name, str) or not name:
        out.reject(where, "entry with a bad profiling_name", repr(name)[:40])
        return None
    backend, _, opname = name.rpartition(":")
    op = opname.lower().replace("_", "") or "unknown"
    p2p = bool(e.get("is_p2p", False))
    seq = _int(e.get("p2p_seq_id") if p2p else e.get("collective_seq_id"))
    t_created = _ns(e.get("time_created_ns"))
    if seq is None or seq < 0:
        out.reject(where, "entry with a bad sequence number")
        return None
    state = e.get("state", "")
    if state not in STATES:
        out.reject(where, "entry with an unknown state", repr(state)[:40])
        return None
    if backend == "gloo":
        state = ""   # never updated by the recorder for gloo
    pg = e.get("process_group")
    comm = ""
    if isinstance(pg, (list, tuple)) and len(pg) == 2:
        comm = str(pg[1] or pg[0])
    comm = comm or str(e.get("pg_id", ""))
    if p2p:   # p2p_seq_id counts apart from collective_seq_id: a sequence of its own
        comm += ":p2p"
    sizes, dtypes = e.get("input_sizes") or [], e.get("input_dtypes") or []
    nbytes = 0
    if isinstance(sizes, list) and isinstance(dtypes, list):
        for shape, dt in zip(sizes, dtypes, strict=False):
            dims = [_int(x) for x in shape] if isinstance(shape, (list, tuple)) else [None]
            if None in dims or any(d < 0 for d in dims if d is not None):  # type: ignore[operator]
                continue
            nbytes += math.prod(dims) * DTYPE_BYTES.get(str(dt), 0)  # type: ignore[arg-type]
        dtype = ",".join(str(d) for d in dtypes)
    else:
        dtype = ""
    t0 = _ns(e.get("time_discovered_started_ns")) or t_created or 0
    t1 = _ns(e.get("time_discovered_completed_ns")) if state == "completed" else None
    start = t0 / 1e9
    end = t1 / 1e9 if t1 else None
    if end is not None and end < start:
        end = start
    rec = CollRecord(rank=rank, comm=comm, op=op, seq=seq, bytes=nbytes, start=start,
                     end=end, source="flight_recorder", host=host, dtype=dtype[:200],
                     state=state, dir="op")
    try:
        rec.check(where)
    except CollogError as exc:
        out.reject(where, "entry with a bad field", str(exc).split(": ", 1)[-1])
        return None
    return rec


def read_flight_recorder(path: str | os.PathLike[str], *, rank: int | None = None,
                         host: str = "") -> ReadResult:
    """Records of one dump (each entry read or rejected with its reason); the rank
    comes from the dump's ``rank`` key, ``rank=``, or the digits ending the file name
    (``trace_rank_3``, ``nccl_trace_rank_3.json``), in that order.  ``members`` of the
    result: each process group's ranks; ``ranks``: this dump's rank (also when empty).
    A file that is not a dump at all raises :class:`CollogError`."""
    p = Path(path)
    data = _load(p)
    r = _int(data.get("rank"))
    if r is None or r < 0:
        r = rank
    if r is None:
        m = re.search(r"(\d+)(?:\.\w+)?$", p.name)
        if m is None:
            raise CollogError(f"{p}: rank unknown (no 'rank' key, no digits ending the "
                              "name): give the file's rank (FILE@RANK)")
        r = int(m.group(1))
    out = ReadResult()
    out.ranks.add(r)
    out.members.update(_members(data))
    for i, e in enumerate(data.get("entries", [])):
        out.lines += 1
        rec = _entry(e, r, host, f"{p} entry {i}", out)
        if rec is not None:
            out.records.append(rec)
            out.read["entry"] += 1
    return out
