"""The running controller's state as one JSON file, and `show` tables from it.

Why a file: `python -m controller show ...` must work from another shell (or another
tool) without a server in the controller; the runner rewrites ``<out>/controller_state.json``
atomically (write to a temporary file, then rename) every status interval, so a reader
never sees half a file.  The `updated_unix_s` field tells how fresh it is.

Schema (version 1)::

    {"version": 1, "updated_unix_s": 1700000000.0, "pid": 123, "topology": "dumbbell-4",
     "switches": [{"name", "address", "device_id", "node_id", "state", "primary", "syncs",
                   "last_sync", "error"}],
     "flows":    [{"src", "dst", "sport", "qp", "hops", "path", "samples", "last_psn",
                   "rate_bps", "lost"}],
     "hops":     [{"node_id", "switch", "egress_port", "qlen_bytes", "qlen_pkts", "tx_rate_bps",
                   "line_rate_bps", "utilisation", "hop_latency_ns", "samples"}],
     "losses":   [{"link", "role", "lost"}],
     "collector": {...counters...},
     "diagnosis": {...} | null,      # --coll-log: controller/diagnose
     "mitigation": {...} | null}     # --mitigate advise|act: controller/mitigate/README.md

``collector`` counts drops of telemetry on the way in: ``reports_lost`` (report sequence
gaps), ``socket_drops`` (the kernel dropped datagrams: the collector fell behind),
``malformed`` (by reason), ``agent_lost_batches`` and ``agent_dropped`` (summed over
the host agents' shippers).  With an exporter, ``collector`` also holds its delivery
state: ``export_lines_written``, ``export_lines_delivered``, ``export_lines_rejected``,
``export_send_failures``, ``export_delivered_by_measurement`` ({measurement: lines})
and the queue depths
``export_buffered_lines``, ``export_queued_batches``, ``export_queued_lines``,
``export_spool_batches``, ``export_spool_lines``, ``export_spool_bytes``.  The file is
written once more after the exporter's final flush, so the last one counts every line.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from common.files import write_json_atomic

STATE_FILE = "controller_state.json"
STATE_VERSION = 1
VIEWS = ("switches", "flows", "hops", "losses")


class StateError(Exception):
    """The state file is missing, unreadable or of another version."""


def write_state(path: str | os.PathLike[str], state: dict[str, Any]) -> None:
    """Atomically replace `path` with `state` as JSON."""
    write_json_atomic(path, state, default=_jsonable)


def _jsonable(x: object) -> object:
    if hasattr(x, "item"):
        return x.item()  # numpy scalars
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)


def read_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise StateError(f"state file {p}: not found; is `python -m controller run --out "
                         f"{p.parent}` running?") from None
    except (OSError, ValueError) as exc:
        raise StateError(f"state file {p}: unreadable: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
        raise StateError(f"state file {p}: version {data.get('version') if isinstance(data, dict) else '?'}"
                         f", expected {STATE_VERSION}")
    return data


def _fmt_rate(bps: Any) -> str:
    if bps is None:
        return "-"
    v = float(bps)
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if v >= div:
            return f"{v / div:.2f}{unit}"
    return f"{v:.0f}"


_COLUMNS: dict[str, list[tuple[str, str, int]]] = {
    # view -> (header, key, width); negative width = left aligned
    "switches": [("switch", "name", -8), ("address", "address", -22), ("dev", "device_id", 4),
                 ("state", "state", -12), ("primary", "primary", -8), ("syncs", "syncs", 6),
                 ("last sync / error", "detail", -40)],
    "flows": [("src", "src", -15), ("dst", "dst", -15), ("sport", "sport", 6), ("qp", "qp", 8),
              ("hops", "hops", 5), ("rate", "rate", 9), ("lost", "lost", 6), ("samples", "samples", 8),
              ("path", "path", -20)],
    "hops": [("switch", "switch", -8), ("node", "node_id", 5), ("port", "egress_port", 5),
             ("qlen B", "qlen_bytes", 9), ("qlen p", "qlen_pkts", 7), ("tx rate", "tx_rate", 9),
             ("line", "line_rate", 9), ("util", "util", 6), ("lat ns", "hop_latency_ns", 9),
             ("samples", "samples", 8)],
    "losses": [("link", "link", -24), ("role", "role", -7), ("lost", "lost", 10)],
}


def _rows(view: str, state: dict[str, Any]) -> list[dict[str, Any]]:
    rows = [dict(r) for r in state.get(view, [])]
    if view == "flows":   # ACK directions are no data flows (format_view counts them)
        rows = [r for r in rows if r.get("kind") != "ack"]
    for r in rows:
        if view == "switches":
            r["detail"] = r.get("error") or r.get("last_sync") or ""
            r["primary"] = "yes" if r.get("primary") else "no"
        elif view == "flows":
            r["rate"] = _fmt_rate(r.get("rate_bps"))
            r["path"] = ">".join(str(n) for n in r.get("path", []))
        elif view == "hops":
            r["tx_rate"] = _fmt_rate(r.get("tx_rate_bps"))
            r["line_rate"] = _fmt_rate(r.get("line_rate_bps"))
            u = r.get("utilisation")
            r["util"] = "-" if u is None else f"{u:.2f}"
    return rows


def format_view(view: str, state: dict[str, Any]) -> str:
    """A fixed-width table of one view (header line first), under ~100 columns."""
    if view not in _COLUMNS:
        raise StateError(f"show: unknown view {view!r}; choose one of {list(VIEWS)}")
    cols = _COLUMNS[view]

    def cell(text: Any, width: int) -> str:
        s = "-" if text is None else str(text)
        w = abs(width)
        if len(s) > w and width < 0 and cols[-1][2] != width:
            s = s[: w - 1] + "~"
        return f"{s:<{w}}" if width < 0 else f"{s:>{w}}"

    lines = [" ".join(cell(h, w) for h, _k, w in cols).rstrip()]
    for r in _rows(view, state):
        lines.append(" ".join(cell(r.get(k), w) for _h, k, w in cols).rstrip())
    if len(lines) == 1:
        lines.append(f"(no {view} yet)")
    acks = [r for r in state.get(view, []) if view == "flows" and r.get("kind") == "ack"]
    if acks:
        lines.append(f"(+ {len(acks)} ACK directions with INT, not listed: their PSNs "
                     "acknowledge data, so no loss is counted from them)")
    return "\n".join(lines)
