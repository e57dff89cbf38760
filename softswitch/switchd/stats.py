"""The switch's statistics file (JSON, written by every target's daemon at its interval
and at close) and its formatting."""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.files import write_json_atomic
from softswitch.switchd.errors import SwitchdError

_COLUMNS = (("port", 5), ("ifname", 15), ("rx_packets", 10), ("tx_packets", 10),
            ("tail_drops", 10), ("queue_depth", 6), ("queue_high_water", 6), ("rx_dropped", 8))
_HEAD = ("port", "interface", "rx", "tx", "tail_drop", "qlen", "q_hwm", "rx_drop")


def format_stats(snap: dict[str, Any]) -> str:
    """A table of per-port counters under one summary line (< 80 columns)."""
    if not snap:
        return "(no statistics)"
    lines = [(f"{snap['name']} device {snap['device_id']}: in {snap['packets_in']} "
             f"out {snap['packets_out']} pipeline drops {snap['pipeline_drops']} "
             f"errors {snap['pipeline_errors']} no-pipeline {snap['no_pipeline']} "
             f"packet-in {snap['packet_ins']}")]
    lines.append(" ".join(h.rjust(w) if i != 1 else h.ljust(w)
                          for i, (h, (_, w)) in enumerate(zip(_HEAD, _COLUMNS))))
    for p in snap["ports"]:
        lines.append(" ".join(str(p[k]).rjust(w) if k != "ifname" else str(p[k]).ljust(w)
                              for k, w in _COLUMNS))
    return "\n".join(lines)


def write_stats(path: str | None, snapshot: Callable[[], dict[str, Any]]) -> None:
    """Write ``snapshot()`` to `path` (``--stats-file``; None: no file), atomically
    replaced so that a reader (`read_stats`) never sees half a file."""
    if path:
        write_json_atomic(path, snapshot())


def read_stats(path: str | Path) -> dict[str, Any]:
    """The statistics a running (or finished) switch wrote to `path`."""
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise SwitchdError(f"statistics file {path}: {exc.strerror}") from None
    except json.JSONDecodeError as exc:
        raise SwitchdError(f"statistics file {path}: not JSON ({exc})") from None
