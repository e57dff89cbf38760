"""Where line-protocol batches go: InfluxDB 1.x /write, the /api/v2 API, or files.

Every sink has ``write(body: bytes)`` (newline-separated lines, ns precision) and
``close()``.  A sink either accepts the whole batch, or raises
``TransientSinkError`` (retry later: server down, overloaded, auth not yet set up)
or ``PermanentSinkError`` (the data itself was refused).  Retrying, batching and
spooling are the exporter's job, not the sink's.
"""
from __future__ import annotations

import csv
import http.client
import os
import re
import socket
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Protocol

from controller.export.errors import ConfigError, PermanentSinkError, TransientSinkError
from controller.export.line_protocol import LineProtocolError, parse_line
from controller.export.schema import CSV_COLUMNS


class Sink(Protocol):
    @property
    def kind(self) -> str: ...

    def write(self, body: bytes) -> None: ...

    def close(self) -> None: ...


def _http(method: str, url: str, body: bytes | None, timeout_s: float,
          headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    """One request; (status, body, headers); OSError-family errors are raised as is."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return resp.status, resp.read(), dict(resp.headers.items())
    except urllib.error.HTTPError as exc:
        try:
            data = exc.read()
        except OSError:
            data = b""
        return exc.code, data, dict(exc.headers.items()) if exc.headers else {}


def _transient_status(status: int) -> bool:
    return status >= 500 or status in (401, 403, 404, 408, 429)


class InfluxV1Sink:
    """InfluxDB 1.x HTTP API: POST /write?db=...&precision=ns (works with 1.0 .. 1.8).

    The database is created on first use (``CREATE DATABASE`` is idempotent).
    """

    kind = "influxdb-v1-write"

    def __init__(self, url: str, *, database: str = "int_telemetry",
                 retention_policy: str | None = None, username: str | None = None,
                 password: str | None = None, timeout_s: float = 5.0,
                 create_database: bool = True) -> None:
        if not database:
            raise ConfigError("InfluxV1Sink: database name is empty")
        self.url = url.rstrip("/")
        self.database = database
        self.timeout_s = timeout_s
        q = {"db": database, "precision": "ns"}
        if retention_policy:
            q["rp"] = retention_policy
        self._auth = {}
        if username is not None:
            self._auth = {"u": username, "p": password or ""}
        q.update(self._auth)
        self._write_url = f"{self.url}/write?{urllib.parse.urlencode(q)}"
        self._need_db = create_database

    def _create_database(self) -> None:
        q = {"q": f'CREATE DATABASE "{self.database}"', **self._auth}
        status, data, _ = _http("POST", f"{self.url}/query?{urllib.parse.urlencode(q)}", b"",
                                self.timeout_s)
        if status >= 300:
            raise TransientSinkError(
                f"InfluxDB 1.x at {self.url}: CREATE DATABASE {self.database} answered "
                f"{status} {data[:200]!r}")
        self._need_db = False

    def write(self, body: bytes) -> None:
        try:
            if self._need_db:
                self._create_database()
            status, data, _ = _http("POST", self._write_url, body, self.timeout_s,
                                    {"Content-Type": "text/plain; charset=utf-8"})
        except (OSError, http.client.HTTPException) as exc:
            raise TransientSinkError(f"InfluxDB 1.x at {self.url}: {exc}") from None
        if status in (200, 204):
            return
        msg = f"InfluxDB 1.x at {self.url} /write answered {status}: {data[:300]!r}"
        if status == 404 and b"database not found" in data:
            self._need_db = True
            raise TransientSinkError(msg)
        if _transient_status(status):
            raise TransientSinkError(msg)
        raise PermanentSinkError(msg)

    def close(self) -> None:
        pass


class InfluxV2Sink:
    """The /api/v2/write API through influxdb-client: InfluxDB 2.x/3.x, 1.8+ (bucket
    "db/rp", token "user:password") and servers speaking it (VictoriaMetrics)."""

    kind = "influxdb-v2-api"

    def __init__(self, url: str, *, org: str = "int", bucket: str = "int_telemetry",
                 token: str = "", timeout_s: float = 5.0) -> None:
        from influxdb_client import InfluxDBClient
        from influxdb_client.client.write_api import SYNCHRONOUS

        if not bucket:
            raise ConfigError("InfluxV2Sink: bucket is empty")
        self.url = url.rstrip("/")
        self.org, self.bucket = org, bucket
        self._client = InfluxDBClient(url=self.url, token=token, org=org,
                                      timeout=int(timeout_s * 1000), retries=False)
        self._api = self._client.write_api(write_options=SYNCHRONOUS)

    def write(self, body: bytes) -> None:
        from influxdb_client.client.write_api import WritePrecision
        from influxdb_client.rest import ApiException

        try:
            self._api.write(bucket=self.bucket, org=self.org, record=body.decode(),
                            write_precision=WritePrecision.NS)  # type: ignore[arg-type]
        except ApiException as exc:
            msg = f"/api/v2/write at {self.url} answered {exc.status}: {str(exc.body)[:300]}"
            if exc.status is None or _transient_status(int(exc.status)):
                raise TransientSinkError(msg) from None
            raise PermanentSinkError(msg) from None
        except Exception as exc:  # noqa: BLE001 - urllib3 connection errors, timeouts
            raise TransientSinkError(f"/api/v2/write at {self.url}: {exc}") from None

    def close(self) -> None:
        self._api.close()
        self._client.close()


class FileSink:
    """Embedded default without a server: line protocol plus one CSV per measurement.

    ``<out_dir>/influx/points.lp`` gets every line as sent; ``<out_dir>/csv/<m>.csv``
    one row per point, columns ``time_ns``, tags, fields (the table in README.md).
    """

    kind = "files"

    def __init__(self, out_dir: str | os.PathLike[str]) -> None:
        self.out_dir = Path(out_dir)
        try:
            (self.out_dir / "influx").mkdir(parents=True, exist_ok=True)
            (self.out_dir / "csv").mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"FileSink: cannot create {self.out_dir}: {exc.strerror}") from None
        self.lp_path = self.out_dir / "influx" / "points.lp"
        self._columns: dict[str, list[str]] = {}

    def csv_path(self, measurement: str) -> Path:
        """CSV file of a measurement (characters unsafe in file names become '_')."""
        return self.out_dir / "csv" / (re.sub(r"[^A-Za-z0-9_.-]", "_", measurement) + ".csv")

    def _csv_columns(self, measurement: str, tags: list[str], fields: list[str]) -> list[str]:
        cols = self._columns.get(measurement)
        if cols is None:
            path = self.csv_path(measurement)
            if path.exists() and path.stat().st_size:
                with path.open(newline="") as fh:
                    cols = next(csv.reader(fh))
            else:
                cols = CSV_COLUMNS.get(measurement) or ["time_ns", *sorted(tags), *sorted(fields)]
                with path.open("w", newline="") as fh:
                    csv.writer(fh).writerow(cols)
            self._columns[measurement] = cols
        return cols

    def write(self, body: bytes) -> None:
        try:
            with self.lp_path.open("ab") as fh:
                fh.write(body if body.endswith(b"\n") else body + b"\n")
            rows: dict[str, list[list[object]]] = {}
            for line in body.decode().splitlines():
                if not line:
                    continue
                try:
                    p = parse_line(line)
                except LineProtocolError:
                    continue  # kept in points.lp; CSV is a convenience view
                cols = self._csv_columns(p.measurement, list(p.tags), list(p.fields))
                values = {"time_ns": p.time_ns, **p.tags, **p.fields}
                rows.setdefault(p.measurement, []).append([values.get(c, "") for c in cols])
            for m, rs in rows.items():
                with self.csv_path(m).open("a", newline="") as fh:
                    csv.writer(fh).writerows(rs)
        except OSError as exc:
            raise TransientSinkError(f"FileSink {self.out_dir}: {exc}") from None

    def close(self) -> None:
        pass


def port_is_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """True when something accepts TCP connections at host:port."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
