"""Structured per-packet trace events.

Why structured: tests and the debugger assert on what happened (which parser
states ran, which table hit which entry, why a packet was dropped) rather than
on log text. The compiled program appends events only when tracing is on (the
per-packet trace list is not None), so a switch without tracing pays one
``is not None`` test per event site.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Event kinds, in the order they usually occur for one packet.
KINDS = (
    "packet_in",       # port, length, instance_type
    "parser_state",    # parser, state
    "extract",         # header (path), fields
    "parser_error",    # error name
    "table",           # table, key, hit, entry, action, args
    "action",          # action, args
    "extern",          # extern name, what it did (hash, register, clone ...)
    "log",             # log_msg text
    "drop",            # reason
    "output",          # port, length
)


@dataclass(slots=True)
class TraceEvent:
    """One thing that happened to a packet in block `block` (parser/control name)."""

    kind: str
    block: str
    detail: dict[str, Any] = field(default_factory=dict)

    def format(self) -> str:
        d = self.detail
        if self.kind == "parser_state":
            return f"[{self.block}] parser state {d['state']}"
        if self.kind == "extract":
            fields = ", ".join(f"{k}={_fmt(v)}" for k, v in d["fields"].items())
            return f"[{self.block}] extract {d['header']}: {fields}"
        if self.kind == "table":
            key = ", ".join(_fmt(k) for k in d["key"])
            args = ", ".join(_fmt(a) for a in d["args"])
            if d["hit"] and d.get("entry"):
                return f"[{self.block}] table {d['table']} key ({key}): hit entry {d['entry']}"
            hit = "hit" if d["hit"] else "miss, default"
            return f"[{self.block}] table {d['table']} key ({key}): {hit} -> {d['action']}({args})"
        if self.kind == "action":
            return f"[{self.block}] action {d['action']}({', '.join(_fmt(a) for a in d['args'])})"
        if self.kind == "drop":
            return f"[{self.block}] drop: {d['reason']}"
        if self.kind == "output":
            return f"[{self.block}] output port {d['port']} ({d['length']} bytes)"
        if self.kind == "packet_in":
            return (f"[{self.block}] packet in port {d['port']} ({d['length']} bytes, "
                    f"instance_type {d.get('instance_type', 0)})")
        if self.kind == "parser_error":
            return f"[{self.block}] parser error {d['error']}"
        if self.kind == "log":
            return f"[{self.block}] log: {d['message']}"
        return f"[{self.block}] {self.kind} " + ", ".join(f"{k}={_fmt(v)}" for k, v in d.items())


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return hex(v) if v >= 10 else str(v)
    return str(v)
