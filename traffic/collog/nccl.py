"""Reads NCCL's ``NCCL_DEBUG=INFO`` output (and the PyTorch lines mixed into it).

A line is ``host:pid:tid [dev] NCCL INFO|WARN message``, maybe behind a launcher's
prefix (``launchers``), a timestamp (``NCCL_DEBUG_TIMESTAMP_FORMAT``, a float or a
date; NCCL 2.26+ puts a local-time ``[%F %T]`` on WARN lines by default) or a bare
``[N]`` rank label; WARN lines may name the source file first (``misc/socket.cc:71
NCCL WARN``); a merged log can interleave two lines into one.  What is taken:

* collectives (``NCCL_DEBUG_SUBSYS=COLL``, NCCL 2.18-2.2x)::

      AllReduce: opCount 1a sendbuff 0x.. recvbuff 0x.. count 1048576 datatype 7 op 0
          root 0 comm 0x55d.. [nranks=8] stream 0x..

  (``opCount`` in hex; Send/Recv: ``root`` is the peer; ``[2] AllReduce: ...`` too)
  -> one record per call, its issue time (``end`` null: the line says nothing of
  completion);
* ``comm 0x55d.. rank 3 nranks 8 ... commId 0x.. - Init COMPLETE`` -> the rank of that
  communicator *in that process* (the key is host, pid and pointer: two hosts can
  print the same pointer) and the commId that names the communicator across ranks;
* WARN lines: NET/IB completion errors (``Got completion from peer 10.0.0.2<55921> with
  status=12``: 12 is "transport retry counter exceeded"), socket errors naming the
  peer (``Connection closed by remote peer node2<42830>``), NCCL's own "collective
  mismatch around rank N" -> events;
* PyTorch watchdog lines (``watchdog``) -> events.

The rank of a line: the communicator's Init line, else the launcher's (torchrun,
mpirun), else ``rank_map`` (``host:pid`` or ``host`` -> rank), else ``rank`` (the whole
file's), else a bare ``[N]`` label.  Every line is counted as read or rejected with its
reason (``ReadResult``); nothing raises but an unreadable file.
"""
from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import datetime, tzinfo
from pathlib import Path

from traffic.collog.launchers import Hints, strip_label, strip_launchers
from traffic.collog.records import CollogError, CollRecord
from traffic.collog.result import CollEvent, ReadResult
from traffic.collog.watchdog import parse_watchdog

__all__ = ["DTYPE_BYTES", "DTYPE_NAMES", "IB_STATUS", "NcclLog", "read_nccl", "read_nccl_text"]

NcclLog = ReadResult   # (the name earlier releases returned)

# ncclDataType_t values -> element size, name (nccl.h)
DTYPE_BYTES = {0: 1, 1: 1, 2: 4, 3: 4, 4: 8, 5: 8, 6: 2, 7: 4, 8: 8, 9: 2, 10: 1, 11: 1}
DTYPE_NAMES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64",
               6: "float16", 7: "float32", 8: "float64", 9: "bfloat16", 10: "float8e4m3",
               11: "float8e5m2"}
# ibv_wc_status values NCCL prints after "status=" / "error"
IB_STATUS = {4: "local protection error", 5: "work request flushed",
             9: "remote invalid request", 10: "remote access error",
             11: "remote operation error", 12: "transport retry counter exceeded",
             13: "RNR retry counter exceeded"}
_OPS = {"AllReduce": "allreduce", "AllGather": "allgather", "ReduceScatter": "reducescatter",
        "Broadcast": "broadcast", "Bcast": "broadcast", "Reduce": "reduce", "Send": "send",
        "Recv": "recv", "AllToAll": "alltoall", "Gather": "gather", "Scatter": "scatter"}

_HEAD = re.compile(
    r"(?:\[(?P<ts>[^\]]*[-:.][^\]]*)\]\s*)?"
    r"(?:(?P<host>[^\s:\[\]()]+):(?P<pid>\d+):(?P<tid>\d+)\s+)?"
    r"\[(?P<dev>\d+)\]\s+"
    r"(?:(?P<src>[\w./-]+\.\w+:\d+)\s+)?"
    r"(?:NCCL )?(?P<lvl>INFO|WARN|TRACE|ABORT)\b\s?(?P<msg>.*)$")
_COLL = re.compile(
    r"^(?:\[\d+\]\s+)?(?P<op>[A-Za-z]+): opCount (?P<opcount>\S+) sendbuff \S+ "
    r"recvbuff \S+ count (?P<count>\S+) datatype (?P<dt>\S+) op \S+ root (?P<root>\S+) "
    r"comm (?P<comm>\S+)(?:.*?)\[nranks=(?P<nranks>[^\]]*)\]")
_COLL_ANY = re.compile(r"\b[A-Za-z]+: opCount\b")
_INIT = re.compile(r"comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+)"
                   r"(?:.*?commId (?P<cid>0x[0-9a-fA-F]+))?")
_IB = re.compile(r"Got completion (?:from peer (?P<peer>[^\s<]+)<(?P<port>\d+)> )?with "
                 r"(?:status=|error )(?P<status>\d+)")
_PEER = re.compile(r"(?:remote peer|Connect to|connect to|peer) (?P<peer>[^\s<]+)<(?P<port>\d+)>")
_MISMATCH = re.compile(r"collective mismatch around rank (?P<rank>\d+)")
_HEX = re.compile(r"[0-9a-fA-F]+")


def _timestamp(text: str, tz: tzinfo | None) -> float | None:
    t = text.strip()
    try:
        v = float(t)
    except ValueError:
        pass
    else:   # Unix seconds, 1970 .. 2242
        return v if 0.0 <= v < 2.0**33 else None
    for fmt in ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f",
                "%Y-%m-%dT%H:%M:%S"):
        try:
            d = datetime.strptime(t, fmt)
        except ValueError:
            continue
        try:   # tz None: the reading machine's local time (NCCL prints local time)
            v = (d.replace(tzinfo=tz) if tz is not None else d).timestamp()
        except (OverflowError, OSError, ValueError):
            return None
        return v if 0.0 <= v < 2.0**33 else None
    return None


class _Reader:
    def __init__(self, name: str, rank: int | None, rank_map: Mapping[str, int],
                 tz: tzinfo | None):
        self.name, self.file_rank, self.rank_map, self.tz = name, rank, rank_map, tz
        self.out = ReadResult()
        self.comm_rank: dict[tuple[str, str, str], int] = {}   # (host, pid, comm) -> rank
        self.comm_id: dict[tuple[str, str, str], str] = {}
        self.proc_rank: dict[tuple[str, str], int] = {}        # first Init of the process

    def rank_of(self, host: str, pid: str, comm: str | None, h: Hints) -> int | None:
        if comm is not None and (host, pid, comm) in self.comm_rank:
            return self.comm_rank[(host, pid, comm)]
        if comm is None and (host, pid) in self.proc_rank:
            return self.proc_rank[(host, pid)]
        if h.rank is not None:
            return h.rank
        for key in (f"{host}:{pid}", host, h.ip):
            if key and key in self.rank_map:
                return self.rank_map[key]
        if self.file_rank is not None:
            return self.file_rank
        return h.label

    def line(self, n: int, raw: str) -> None:
        out = self.out
        out.lines += 1
        where = f"{self.name}:{n}"
        if not raw.strip():
            out.read["blank"] += 1
            return
        text, h = strip_launchers(raw)
        m = _HEAD.match(text)
        if m is None:
            rest = strip_label(text, h)
            if rest is not None:
                text = rest
                m = _HEAD.match(text)
        while m is not None:   # two processes' lines interleaved: the inner one counts
            inner = _HEAD.match(m.group("msg"))
            if inner is None or not inner.group("host"):
                break
            m = inner
        if m is None:
            self.other(text, h, where)
            return
        host = m.group("host") or ""
        pid = m.group("pid") or ""
        ts = _timestamp(m.group("ts"), self.tz) if m.group("ts") else None
        if m.group("ts") and ts is None:
            out.reject(where, "timestamp not understood", m.group("ts")[:40])
            return
        msg = m.group("msg")
        if m.group("lvl") == "WARN":
            self.warn(msg, host, pid, h, ts, where)
            return
        mc = _COLL.match(msg)
        if mc is not None:
            self.coll(mc, host, pid, h, ts, where)
            return
        if _COLL_ANY.search(msg):
            out.reject(where, "collective line not understood")
            return
        mi = _INIT.search(msg)
        if mi is not None:
            key = (host, pid, mi.group("comm"))
            self.comm_rank[key] = int(mi.group("rank"))
            self.proc_rank.setdefault((host, pid), int(mi.group("rank")))
            if mi.group("cid"):
                self.comm_id[key] = mi.group("cid")
            out.read["init"] += 1
            return
        out.read["info"] += 1

    def other(self, text: str, h: Hints, where: str) -> None:
        out = self.out
        ev = parse_watchdog(text, where)
        if isinstance(ev, CollEvent):
            ev.host = h.ip
            if ev.rank is None:
                ev.rank = h.best_rank
            out.events.append(ev)
            out.read[ev.kind] += 1
        elif ev == "pytorch":
            out.read["pytorch"] += 1
        elif _COLL_ANY.search(text):
            out.reject(where, "collective line without NCCL's host:pid:tid [dev] prefix")
        else:
            out.reject(where, "not an NCCL or PyTorch distributed line")

    def warn(self, msg: str, host: str, pid: str, h: Hints, ts: float | None,
             where: str) -> None:
        ev = CollEvent(kind="warn", rank=self.rank_of(host, pid, None, h), host=h.ip or host,
                       t=ts, where=where, text=msg[:200])
        mi = _IB.search(msg)
        mp = _PEER.search(msg)
        mm = _MISMATCH.search(msg)
        if mi is not None:
            ev.kind, ev.status = "net_error", int(mi.group("status"))
            if mi.group("peer"):
                ev.peer_host, ev.peer_port = mi.group("peer"), int(mi.group("port"))
        elif "retry counter exceeded" in msg.lower():
            ev.kind = "net_error"
        elif mp is not None:
            ev.kind = "socket_error"
            ev.peer_host, ev.peer_port = mp.group("peer"), int(mp.group("port"))
        elif mm is not None:
            ev.kind, ev.peer_rank = "mismatch_hint", int(mm.group("rank"))
        if ev.kind == "net_error" and mp is not None and not ev.peer_host:
            ev.peer_host, ev.peer_port = mp.group("peer"), int(mp.group("port"))
        self.out.events.append(ev)
        self.out.read[ev.kind] += 1

    def coll(self, m: re.Match[str], host: str, pid: str, h: Hints, ts: float | None,
             where: str) -> None:
        out = self.out
        op = _OPS.get(m.group("op"))
        if op is None:
            out.reject(where, "unknown operation", m.group("op"))
            return
        try:
            dt = int(m.group("dt"))
            count = int(m.group("count"))
            root = int(m.group("root"))
            nranks = int(m.group("nranks"))
        except ValueError:
            out.reject(where, "collective line not understood", "a number field")
            return
        if dt not in DTYPE_BYTES:
            out.reject(where, "unknown datatype", str(dt))
            return
        if not _HEX.fullmatch(m.group("opcount")):
            out.reject(where, "collective line not understood", "opCount")
            return
        if count < 0 or nranks <= 0:
            out.reject(where, "collective line not understood", "count or nranks")
            return
        comm = m.group("comm")
        r = self.rank_of(host, pid, comm, h)
        if r is None or r < 0:
            out.reject(where, "rank unknown", f"comm {comm} of {host}:{pid}: no Init COMPLETE "
                       "line before it, no launcher rank; give --rank-map or the file's rank")
            return
        p2p = op in ("send", "recv")
        rec = CollRecord(
            rank=r, comm=self.comm_id.get((host, pid, comm), f"nranks={nranks}"), op=op,
            seq=int(m.group("opcount"), 16), dir=op if p2p else "op",
            peer=root if p2p and root >= 0 else None, bytes=count * DTYPE_BYTES[dt],
            start=ts or 0.0, end=None, source="nccl", host=h.ip or host,
            dtype=DTYPE_NAMES[dt])
        try:
            rec.check(where)
        except CollogError as e:
            out.reject(where, "collective line not understood", str(e).split(": ", 1)[-1])
            return
        out.records.append(rec)
        out.read["collective"] += 1


def read_nccl_text(text: str, name: str = "<text>", *, rank: int | None = None,
                   rank_map: Mapping[str, int] | None = None,
                   tz: tzinfo | None = None) -> ReadResult:
    """The lines of ``text`` (a log's contents) as :func:`read_nccl` reads a file."""
    rd = _Reader(name, rank, rank_map or {}, tz)
    for n, line in enumerate(text.splitlines(), 1):
        rd.line(n, line)
    return rd.out


def read_nccl(path: str | os.PathLike[str], *, rank: int | None = None,
              rank_map: Mapping[str, int] | None = None, tz: tzinfo | None = None
              ) -> ReadResult:
    """Records and events of one log (one process's, or many merged).  ``rank``: the
    file's rank where no line says it; ``rank_map``: ``host:pid`` / ``host`` -> rank;
    ``tz``: the zone of date timestamps (default: this machine's local time)."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        raise CollogError(f"{p}: {e.strerror}") from None
    return read_nccl_text(text, str(p), rank=rank, rank_map=rank_map, tz=tz)
