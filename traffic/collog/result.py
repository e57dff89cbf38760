"""What a reader of library logs returns: records, events, and an account of every line.

Why an account: a log a reader half understands is worse than one it refuses, unless
the user sees what was left out.  Every line (or dump entry) is either *read* (counted
under what it was: a collective, an error, an informational line ...) or *rejected*
with its reason and place; ``lines == sum(read) + len(rejected)`` always holds, and
:meth:`ReadResult.summary` is what the CLI prints.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from traffic.collog.records import CollRecord

__all__ = ["CollEvent", "ReadResult"]


@dataclass(slots=True, kw_only=True)
class CollEvent:
    """A line that reports trouble rather than an operation: a NET/IB completion error,
    a socket error naming the peer, a PyTorch watchdog timeout, another WARN line."""

    kind: str                    # net_error | socket_error | watchdog | watchdog_progress
                                 # | mismatch_hint | warn
    rank: int | None = None
    host: str = ""
    comm: str = ""
    seq: int | None = None       # the operation it is about (watchdog: SeqNum)
    op: str = ""
    peer_host: str = ""          # the peer the error names (address or host name)
    peer_port: int | None = None
    peer_rank: int | None = None
    status: int | None = None    # ibv_wc_status of a NET/IB completion error
    last_enqueued: int | None = None
    last_completed: int | None = None
    numel: int | None = None
    t: float | None = None       # Unix seconds when the line says
    where: str = ""              # file:line
    text: str = ""               # the line's message (shortened)

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__slots__  # type: ignore[attr-defined]
                if getattr(self, k) not in (None, "")}


@dataclass(slots=True)
class ReadResult:
    records: list[CollRecord] = field(default_factory=list)
    events: list[CollEvent] = field(default_factory=list)
    read: Counter[str] = field(default_factory=Counter)  # what -> lines
    rejected: list[str] = field(default_factory=list)    # "file:line: why"
    reasons: Counter[str] = field(default_factory=Counter)
    lines: int = 0
    ranks: set[int] = field(default_factory=set)    # ranks the input is of (even if empty)
    members: dict[str, list[int]] = field(default_factory=dict)  # comm -> member ranks

    def reject(self, where: str, why: str, detail: str = "") -> None:
        """Count a line as rejected: ``why`` is the reason counted, ``detail`` what
        differs line to line (a value, a field)."""
        self.rejected.append(f"{where}: {why}" + (f" ({detail})" if detail else ""))
        self.reasons[why] += 1

    def extend(self, other: ReadResult) -> None:
        self.records += other.records
        self.events += other.events
        self.read.update(other.read)
        self.rejected += other.rejected
        self.reasons.update(other.reasons)
        self.lines += other.lines
        self.ranks |= other.ranks
        for k, v in other.members.items():
            self.members.setdefault(k, v)

    @property
    def accounted(self) -> int:
        return sum(self.read.values()) + len(self.rejected)

    def summary(self, *, examples: int = 3) -> str:
        """One paragraph: lines read by kind, rejected by reason, a few examples."""
        read = ", ".join(f"{n} {k}" for k, n in self.read.most_common())
        out = [f"{self.lines} line(s)/entries: read {sum(self.read.values())}"
               + (f" ({read})" if read else "") + f"; rejected {len(self.rejected)}"]
        for why, n in self.reasons.most_common():
            out.append(f"  rejected {n} x {why}")
        for r in self.rejected[:examples]:
            out.append(f"  e.g. {r}")
        return "\n".join(out)
