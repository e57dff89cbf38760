"""numpy mirrors of the sink's per-flow structs, and the counter names (int_formats.h).

The host record itself is ``formats.int_md.HOST_RECORD_DTYPE`` (the controller decodes
it too); per-flow state and counters stay in this package.
"""

from __future__ import annotations

import enum
import ipaddress

import numpy as np

__all__ = ["ECHO_ENTRY_SIZE", "FLOW_DTYPE", "FLOW_KEY_DTYPE", "FLOW_STATS_DTYPE", "SinkStat",
           "flow_value_dtype", "format_flows"]

FLOW_KEY_DTYPE = np.dtype({
    "names": ["src_ip", "dst_ip", "dest_qp", "src_port"],
    "formats": ["<u4", "<u4", "<u4", "<u2"],
    "offsets": [0, 4, 8, 12],
    "itemsize": 16,
})
"""``struct int_flow_key`` (host-order IPv4 addresses)."""

FLOW_STATS_DTYPE = np.dtype({
    "names": ["packets", "bytes", "int_packets", "lost_packets", "loss_events",
              "out_of_order", "first_ns", "last_ns", "highest_psn", "last_gap",
              "path_signature", "last_hop_count", "opcode", "run", "run_first_ns",
              "run_last_ns"],
    "formats": ["<u8"] * 8 + ["<u4"] * 3 + ["u1", "u1"] + ["<u8"] * 3,
    "offsets": [0, 8, 16, 24, 32, 40, 48, 56, 64, 68, 72, 76, 77, 80, 88, 96],
    "itemsize": 104,
})
"""``struct int_flow_stats``: see the field comments in ``int_formats.h``."""

ECHO_ENTRY_SIZE = 272
"""``struct int_echo_entry``: with the INT echo it follows the stats in a flow entry."""


def flow_value_dtype(echo: bool) -> np.dtype:
    """The flows map's value (``struct flow_value`` of int_sink.c): the stats, and
    with the echo its entry behind them (left out of the fields)."""
    if not echo:
        return FLOW_STATS_DTYPE
    fields = FLOW_STATS_DTYPE.fields
    assert fields is not None and FLOW_STATS_DTYPE.names is not None
    names = list(FLOW_STATS_DTYPE.names)
    return np.dtype({"names": names, "formats": [fields[n][0] for n in names],
                     "offsets": [fields[n][1] for n in names],
                     "itemsize": FLOW_STATS_DTYPE.itemsize + ECHO_ENTRY_SIZE})


FLOW_DTYPE = np.dtype([("key", FLOW_KEY_DTYPE), ("stats", FLOW_STATS_DTYPE)])
"""One row of ``IntSink.flows()``: key and stats side by side."""


class SinkStat(enum.IntEnum):
    """Slots of the sink's ``stats`` counter array (``enum int_stat``)."""

    INT_STRIPPED = 0
    ROCE_PLAIN = 1
    OTHER = 2
    BAD_SHORT = 3
    BAD_SHIM = 4
    BAD_VERSION = 5
    BAD_LENGTH = 6
    BAD_HOP_ML = 7
    BAD_TOO_MANY = 8
    BAD_BITMAP = 9
    BAD_IP = 10
    RINGBUF_FULL = 11
    STRIP_FAILED = 12
    MALFORMED_DROPPED = 13
    ECHO_APPENDED = 14
    ECHO_NO_HOPS = 15
    ECHO_FAILED = 16
    RUN_CONTENDED = 17
    RUNS_FLUSHED = 18


FLOWS_HEADER = (f"{'source':<21} {'destination':<15} {'qp':>6} {'packets':>8} {'lost':>5} "
                f"{'ooo':>5} {'hops':>4} {'path':>8}")


def format_flows(flows: np.ndarray, limit: int = 20) -> list[str]:
    """Table lines (< 80 columns) for the ``limit`` busiest flows of a FLOW_DTYPE array."""
    order = np.argsort(flows["stats"]["packets"])[::-1][:limit]
    lines = [FLOWS_HEADER]
    for row in flows[order]:
        k, st = row["key"], row["stats"]
        src = f"{ipaddress.IPv4Address(int(k['src_ip']))}:{int(k['src_port'])}"
        lines.append(f"{src:<21} {ipaddress.IPv4Address(int(k['dst_ip']))!s:<15} "
                     f"{int(k['dest_qp']):>6x} {int(st['packets']):>8} "
                     f"{int(st['lost_packets']):>5} {int(st['out_of_order']):>5} "
                     f"{int(st['last_hop_count']):>4} {int(st['path_signature']):>08x}")
    return lines
