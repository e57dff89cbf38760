"""Launcher prefixes in front of library log lines, and what they say about the rank.

Why: jobs rarely print NCCL's or PyTorch's lines bare; the launcher that gathered the
processes' output puts its own label first, and often that label is the only place
the rank or the node is named.  Recognised (repeatedly, in any order):

* Ray: ``(RayTrainWorker pid=615, ip=10.72.7.6) `` or ``(pid=615) `` -> the node's address
* torchrun / PyTorch: ``[rank3]:`` -> global rank 3 (``[default3]:``, torchrun's local
  rank under ``--tee``, is dropped: it is not the global rank)
* Open MPI ``--tag-output``: ``[1,3]<stdout>:`` -> rank 3 (job 1)
* a bare ``[3] `` label (``torchrun --log-dir``, ``srun --label``, ``mpirun -l``) -> rank 3;
  only digits: a bracketed timestamp has ``-``, ``:`` or ``.`` in it and is not taken
  as a label.  The bare label is taken last, as it is ambiguous with NCCL's ``[dev]``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Hints", "strip_label", "strip_launchers"]

_RAY = re.compile(r"\((?:[\w.\-]+ )?pid=(?P<pid>\d+)(?:, ip=(?P<ip>[0-9A-Fa-f.:]+))?\)\s*")
_TORCHRUN = re.compile(r"\[(?P<kind>rank|default)(?P<rank>\d+)\]:\s?")
_MPI = re.compile(r"\[(?P<job>\d+),(?P<rank>\d+)\]<(?:stdout|stderr|stddiag)>:\s?")
_LABEL = re.compile(r"\[(?P<rank>\d+)\]\s+")


@dataclass(slots=True)
class Hints:
    rank: int | None = None      # from the launcher (torchrun, mpirun)
    label: int | None = None     # a bare [N] label (used only when nothing else says)
    ip: str = ""                 # Ray's ip=

    @property
    def best_rank(self) -> int | None:
        return self.rank if self.rank is not None else self.label


def strip_launchers(line: str) -> tuple[str, Hints]:
    """``line`` without the unambiguous launcher prefixes, and what they said."""
    h = Hints()
    s = line.lstrip()
    while True:
        m = _RAY.match(s)
        if m:
            h.ip = m.group("ip") or h.ip
            s = s[m.end():]
            continue
        m = _TORCHRUN.match(s)
        if m:
            if m.group("kind") == "rank":
                h.rank = int(m.group("rank"))
            s = s[m.end():]
            continue
        m = _MPI.match(s)
        if m:
            h.rank = int(m.group("rank"))
            s = s[m.end():]
            continue
        return s, h


def strip_label(line: str, h: Hints) -> str | None:
    """``line`` without a leading bare ``[N] `` label (noted in ``h``), else None."""
    m = _LABEL.match(line)
    if m is None:
        return None
    h.label = int(m.group("rank"))
    rest, more = strip_launchers(line[m.end():])
    h.rank = more.rank if more.rank is not None else h.rank
    h.ip = more.ip or h.ip
    return rest
