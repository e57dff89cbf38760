"""Reads ``NCCL_DEBUG=INFO`` (``NCCL_DEBUG_SUBSYS=COLL``) logs into collective records.

NCCL prints one line per collective call as it is enqueued::

    host:pid:tid [dev] NCCL INFO AllReduce: opCount 1a sendbuff 0x.. recvbuff 0x..
        count 1048576 datatype 7 op 0 root 0 comm 0x55d.. [nranks=8] stream 0x..

(``opCount`` in hex; for Send/Recv ``root`` is the peer) and, at communicator set-up,
``comm 0x55d.. rank 3 nranks 8 ... - Init COMPLETE``, which maps the communicator
pointer to the rank.  With ``NCCL_DEBUG_TIMESTAMP_FORMAT`` a bracketed time comes
first.  The lines say when each operation was *issued*, not when it finished, so the
records are whole operations (``dir`` "op") with ``end`` null; what they tell the
diagnosis is which rank stopped issuing operations, and at which sequence number.
Lines of other subsystems are skipped; a collective line that does not parse is
counted in ``NcclLog.rejected`` with its line number.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from traffic.collog.records import CollogError, CollRecord

__all__ = ["DTYPE_BYTES", "NcclLog", "read_nccl"]

# ncclDataType_t values -> element size (nccl.h: Int8, Uint8, Int32, Uint32, Int64,
# Uint64, Float16, Float32, Float64, Bfloat16, then the two FP8 types)
DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}

_PREFIX = (r"^(?:\[(?P<ts>[^\]]+)\]\s*)?(?P<host>[^\s:]+):(?P<pid>\d+):(?P<tid>\d+)\s+"
           r"\[(?P<dev>\d+)\]\s+NCCL INFO\s+")
_COLL = re.compile(_PREFIX + r"(?P<op>[A-Za-z]+): opCount (?P<opcount>[0-9a-fA-F]+) "
                   r"sendbuff (?P<sb>\S+) recvbuff (?P<rb>\S+) count (?P<count>\d+) "
                   r"datatype (?P<dt>\d+) op (?P<redop>\d+) root (?P<root>-?\d+) "
                   r"comm (?P<comm>0x[0-9a-fA-F]+|\(nil\)) \[nranks=(?P<nranks>\d+)\]")
_INIT = re.compile(_PREFIX + r".*?comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) "
                   r"nranks (?P<nranks>\d+)")
_OPS = {"AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reducescatter",
        "Broadcast": "broadcast", "Reduce": "reduce", "Send": "send", "Recv": "recv",
        "AllToAll": "alltoall", "Gather": "gather", "Scatter": "scatter"}


@dataclass(slots=True)
class NcclLog:
    records: list[CollRecord] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)  # "file:line: why"


def _timestamp(text: str | None, where: str) -> float | None:
    if text is None:
        return None
    t = text.strip()
    try:
        return float(t)
    except ValueError:
        pass
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f",
                "%Y-%m-%dT%H:%M:%S"):
        try:
            return datetime.strptime(t, fmt).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
    raise CollogError(f"{where}: timestamp {t!r} not understood")


def read_nccl(path: str | os.PathLike[str], *, rank: int | None = None) -> NcclLog:
    """Collective lines of one NCCL log.  ``rank`` overrides the rank found in the
    ``Init COMPLETE`` line (logs of jobs that print it elsewhere)."""
    p = Path(path)
    out = NcclLog()
    comm_rank: dict[str, int] = {}
    try:
        lines = p.read_text(errors="replace").splitlines()
    except OSError as e:
        raise CollogError(f"{p}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        if "NCCL INFO" not in line:
            continue
        where = f"{p}:{n}"
        m = _COLL.match(line)
        if m is None:
            mi = _INIT.match(line)
            if mi:
                comm_rank[mi.group("comm")] = int(mi.group("rank"))
            elif re.search(r"NCCL INFO\s+[A-Za-z]+: opCount", line):
                out.rejected.append(f"{where}: collective line not understood")
            continue
        op = _OPS.get(m.group("op"))
        dt = int(m.group("dt"))
        if op is None or dt not in DTYPE_BYTES:
            why = f"operation {m.group('op')!r}" if op is None else f"datatype {dt}"
            out.rejected.append(f"{where}: unknown {why}")
            continue
        r = rank if rank is not None else comm_rank.get(m.group("comm"))
        if r is None:
            out.rejected.append(f"{where}: rank of comm {m.group('comm')} unknown (no "
                                "Init COMPLETE line before it; pass rank=)")
            continue
        try:
            ts = _timestamp(m.group("ts"), where)
        except CollogError as e:
            out.rejected.append(str(e))
            continue
        p2p = op in ("send", "recv")
        out.records.append(CollRecord(
            rank=r, comm=m.group("comm"), op=op, seq=int(m.group("opcount"), 16),
            dir=op if p2p else "op", peer=int(m.group("root")) if p2p else None,
            bytes=int(m.group("count")) * DTYPE_BYTES[dt], start=ts or 0.0, end=None,
            source="nccl", host=m.group("host")))
    return out
