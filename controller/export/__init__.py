"""Export of telemetry state: InfluxDB line protocol to InfluxDB 1.x/2.x/3.x, servers
speaking /api/v2/write, or files.  See README.md for the measurement table.

Public API:

* ``open_exporter(url=None, *, out_dir, ...)`` -> ``Exporter``: probes ``url`` and picks
  the sink (``InfluxV1Sink`` for InfluxDB < 1.8, ``InfluxV2Sink`` otherwise); without a
  URL writes files under ``out_dir`` (``FileSink``).
* ``Exporter.write(lines)``, ``flush()``, ``close()``; spool under ``<out_dir>/spool``.
* ``schema.collector_lines(collector, time_ns=...)`` and friends: the lines to write.
* ``CollectorExport``: a thread exporting a collector's state every interval.
"""
from controller.export.errors import (
    ConfigError,
    ExportError,
    LineProtocolError,
    PermanentSinkError,
    ProbeError,
    SinkError,
    TransientSinkError,
)
from controller.export.exporter import Exporter, ExporterStats
from controller.export.line_protocol import Point, format_columns, format_line, parse_line
from controller.export.probe import ServerInfo, ServerKind, probe
from controller.export.runner import CollectorExport, open_exporter, open_sink
from controller.export.sinks import FileSink, InfluxV1Sink, InfluxV2Sink

__all__ = [
    "CollectorExport",
    "ConfigError",
    "ExportError",
    "Exporter",
    "ExporterStats",
    "FileSink",
    "InfluxV1Sink",
    "InfluxV2Sink",
    "LineProtocolError",
    "PermanentSinkError",
    "Point",
    "ProbeError",
    "ServerInfo",
    "ServerKind",
    "SinkError",
    "TransientSinkError",
    "format_columns",
    "format_line",
    "open_exporter",
    "open_sink",
    "parse_line",
    "probe",
]
