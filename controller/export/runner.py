"""Choosing a sink from a URL, and exporting a collector's state periodically."""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

from controller.export.credentials import check_url
from controller.export.errors import ConfigError, ProbeError, TransientSinkError
from controller.export.exporter import Exporter
from controller.export.probe import ServerInfo, ServerKind, probe
from controller.export.schema import collector_lines
from controller.export.sinks import FileSink, InfluxV1Sink, InfluxV2Sink, Sink

log = logging.getLogger("controller.export")


@dataclass(slots=True, kw_only=True)
class InfluxTarget:
    """Names on the server: 1.x database/retention policy, or 2.x org/bucket/token."""

    database: str = "int_telemetry"
    retention_policy: str | None = None
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    org: str = "int"
    bucket: str | None = None  # default: the database name
    token: str = field(default="", repr=False)
    timeout_s: float = 5.0


def sink_for(info: ServerInfo, target: InfluxTarget) -> Sink:
    """The sink matching a probed server."""
    if info.kind is ServerKind.INFLUX_V1_WRITE:
        return InfluxV1Sink(info.url, database=target.database,
                            retention_policy=target.retention_policy, username=target.username,
                            password=target.password, timeout_s=target.timeout_s)
    version = info.version or ""
    if version.startswith("1.") and info.product:  # InfluxDB 1.8+: v2 compatibility API
        InfluxV1Sink(info.url, database=target.database, username=target.username,
                     password=target.password, timeout_s=target.timeout_s)._create_database()
        bucket = f"{target.database}/{target.retention_policy or ''}"
        token = f"{target.username}:{target.password}" if target.username else target.token
        return InfluxV2Sink(info.url, org="-", bucket=bucket, token=token,
                            timeout_s=target.timeout_s)
    return InfluxV2Sink(info.url, org=target.org, bucket=target.bucket or target.database,
                        token=target.token, timeout_s=target.timeout_s)


class ProbingSink:
    """Probes the server on first write (and again after failures until it answers),
    so a controller can start while the database is still down: batches are spooled
    meanwhile."""

    def __init__(self, url: str, target: InfluxTarget) -> None:
        self.url = url
        self.target = target
        self.inner: Sink | None = None
        self.info: ServerInfo | None = None

    @property
    def kind(self) -> str:
        return self.inner.kind if self.inner else f"unprobed server {self.url}"

    def write(self, body: bytes) -> None:
        if self.inner is None:
            try:
                self.info = probe(self.url, timeout_s=self.target.timeout_s)
                self.inner = sink_for(self.info, self.target)
            except ProbeError as exc:
                raise TransientSinkError(str(exc)) from None
            log.info("export: %s is %s (version %s)", self.url, self.info.kind.value,
                     self.info.version)
        self.inner.write(body)

    def close(self) -> None:
        if self.inner is not None:
            self.inner.close()


def open_sink(url: str | None, *, out_dir: str | os.PathLike[str],
              target: InfluxTarget | None = None) -> Sink:
    """FileSink under out_dir without a URL, else a sink chosen by probing the URL."""
    if url is None:
        return FileSink(out_dir)
    if not url.startswith(("http://", "https://")):
        raise ConfigError(f"export URL {url!r} must start with http:// or https://")
    check_url(url)
    return ProbingSink(url, target or InfluxTarget())


def open_exporter(url: str | None = None, *, out_dir: str | os.PathLike[str],
                  target: InfluxTarget | None = None, **exporter_kw: object) -> Exporter:
    """An Exporter to ``url`` (or files), spooling under ``<out_dir>/spool``."""
    sink = open_sink(url, out_dir=out_dir, target=target)
    return Exporter(sink, spool_dir=Path(out_dir) / "spool", **exporter_kw)  # type: ignore[arg-type]


class CollectorExport:
    """Every ``interval_s``: hops and flows updated since the last round, plus counters."""

    def __init__(self, collector: object, exporter: Exporter, *, interval_s: float = 1.0,
                 name: str = "controller") -> None:
        if not interval_s > 0:
            raise ConfigError(f"CollectorExport.interval_s={interval_s} must be > 0")
        self.collector = collector
        self.exporter = exporter
        self.interval_s = interval_s
        self.name = name
        self._since = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def export_once(self) -> int:
        """One round now; returns the number of lines written."""
        now_mono = time.monotonic_ns()
        lines = collector_lines(self.collector, time_ns=time.time_ns(),  # type: ignore[arg-type]
                                since_ns=self._since, name=self.name)
        self._since = now_mono
        self.exporter.write(lines)
        return len(lines)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.export_once()
            except Exception:
                log.exception("collector export round failed")

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._run, name="int-export", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        self.export_once()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
