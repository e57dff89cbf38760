"""PyTorch ProcessGroupNCCL watchdog lines: which sequence number each rank is stuck at.

When a collective does not finish within the process group's timeout, every rank that
is waiting in it prints (through glog, often behind ``[rankN]:``)::

    [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=808,
        OpType=ALLREDUCE, NumelIn=9801523, NumelOut=9801523, Timeout(ms)=600000) ran for
        600020 milliseconds before timing out.
    [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception (either an error or timeout)
        detected by watchdog at work: 808, last enqueued NCCL work: 811, last completed
        NCCL work: 807.

(older releases: ``[E ProcessGroupNCCL.cpp:737] [Rank 1] ...`` without NumelIn; 2.4+
also ``Timeout at NCCL work: N, last enqueued ..., last completed ...``).  A rank
that never prints one while the others time out at N is the one they wait for.
Gloo's own errors name the peer whose connection closed (``Connection closed by peer
[10.0.0.2]:60572``): a socket error like NCCL's.
"""
from __future__ import annotations

import re

from traffic.collog.result import CollEvent

__all__ = ["parse_watchdog"]

_RANK = r"\[(?:PG (?:ID )?(?P<pg>\d+)[^\]]*?)?Rank (?P<rank>\d+)\]\s*"
_TIMEOUT = re.compile(_RANK + r"Watchdog caught collective operation timeout: "
                      r"Work\w*\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)"
                      r"(?:, NumelIn=(?P<nin>-?\d+))?")
_PROGRESS = re.compile(_RANK + r".*?(?:detected by watchdog at work|Timeout at NCCL work):"
                       r" (?P<seq>-?\d+), last enqueued NCCL work: (?P<enq>-?\d+), "
                       r"last completed NCCL work: (?P<done>-?\d+)")
# gloo (the CPU backend): "[../gloo/transport/tcp/pair.cc:553] Connection closed by peer
# [127.0.0.1]:60572", "Timed out waiting 3000ms for recv operation to complete"
_GLOO_PEER = re.compile(r"gloo.*?Connection (?:closed|reset) by peer \[(?P<peer>[^\]]+)\]:(?P<port>\d+)")
_OTHER = re.compile(r"ProcessGroup(?:NCCL|Gloo)|Watchdog|\bc10d\b|NCCL_ASYNC|TORCH_NCCL|"
                    r"/gloo/")


def parse_watchdog(text: str, where: str) -> CollEvent | str | None:
    """The event a PyTorch line reports; ``"pytorch"`` for other c10d lines that carry
    nothing the diagnosis uses; None: not a PyTorch distributed line."""
    m = _TIMEOUT.search(text)
    if m:
        op = m.group("op").strip("_").lower().replace("_", "")
        return CollEvent(kind="watchdog", rank=int(m.group("rank")), seq=int(m.group("seq")),
                         op=op, comm=m.group("pg") or "",
                         numel=int(m.group("nin")) if m.group("nin") else None,
                         where=where, text=text[m.start():m.start() + 200])
    m = _PROGRESS.search(text)
    if m:
        return CollEvent(kind="watchdog_progress", rank=int(m.group("rank")),
                         seq=int(m.group("seq")), last_enqueued=int(m.group("enq")),
                         last_completed=int(m.group("done")), comm=m.group("pg") or "",
                         where=where, text=text[m.start():m.start() + 200])
    m = _GLOO_PEER.search(text)
    if m:
        return CollEvent(kind="socket_error", peer_host=m.group("peer"),
                         peer_port=int(m.group("port")), where=where,
                         text=text[m.start():m.start() + 200])
    if _OTHER.search(text):
        return "pytorch"
    return None
