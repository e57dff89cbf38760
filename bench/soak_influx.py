"""A private influxd 1.x for the soak, and the points it holds per measurement.

Why its own server: the soak checks the export end to end, so it needs a database
that holds only this run's points.  The server runs on free loopback ports with every
file in one folder, and is stopped by PID.  Counting reads every point back
(``SELECT *`` in chunks): one row is one point, whatever fields it carries, so the
count compares with the exporter's line count one to one.
"""
from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Self

from common.processes import PrivateServer, ServerStartError, free_loopback_port

__all__ = ["InfluxError", "PrivateInfluxd", "count_points", "find_influxd"]


class InfluxError(RuntimeError):
    """The private server did not start, or a query failed."""


def find_influxd() -> str | None:
    return shutil.which("influxd") or (
        "/usr/bin/influxd" if Path("/usr/bin/influxd").exists() else None)


def _get(url: str, timeout_s: float = 30.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return bytes(r.read())


class PrivateInfluxd(PrivateServer):
    """``influxd run`` with meta, data and WAL under ``workdir``; a context manager."""

    def __init__(self, workdir: Path, *, binary: str | None = None) -> None:
        binary = binary or find_influxd()
        if binary is None:
            raise InfluxError("influxd not found (Debian package influxdb); or pass --influx URL")
        super().__init__(Path(workdir), binary, free_loopback_port(), what="influxd")
        self.log_path = self.workdir / "influxd.log"
        self.config_path = self._config()

    def _config(self) -> Path:
        w = self.workdir
        conf = w / "influxdb.conf"
        conf.write_text(
            f'reporting-disabled = true\nbind-address = "127.0.0.1:{free_loopback_port()}"\n'
            f'[meta]\n  dir = "{w / "meta"}"\n'
            f'[data]\n  dir = "{w / "data"}"\n  wal-dir = "{w / "wal"}"\n'
            '  query-log-enabled = false\n'
            '[monitor]\n  store-enabled = false\n'
            f'[http]\n  bind-address = "127.0.0.1:{self.port}"\n  log-enabled = false\n'
            '[continuous_queries]\n  enabled = false\n[subscriber]\n  enabled = false\n')
        return conf

    def argv(self) -> list[str]:
        return [self.binary, "run", "-config", str(self.config_path)]

    def ready(self) -> bool:
        try:
            _get(self.url + "/ping", timeout_s=0.5)
        except OSError:
            return False
        return True

    def start(self, timeout_s: float = 30.0) -> None:
        try:
            super().start(timeout_s)
        except ServerStartError as exc:
            raise InfluxError(str(exc)) from None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _query(url: str, db: str, q: str, *, chunked: bool = False) -> list[dict]:
    params = {"db": db, "q": q, "epoch": "ns"}
    if chunked:
        params.update(chunked="true", chunk_size="10000")
    try:
        raw = _get(f"{url.rstrip('/')}/query?{urllib.parse.urlencode(params)}")
    except (OSError, urllib.error.HTTPError) as exc:
        raise InfluxError(f"InfluxDB {url}: query {q!r} on {db!r} failed: {exc}") from None
    out = []
    for line in raw.decode().splitlines():  # chunked answers are one JSON object a line
        if not line.strip():
            continue
        doc = json.loads(line)
        for res in doc.get("results", []):
            if "error" in res:
                raise InfluxError(f"InfluxDB {url}: query {q!r} on {db!r}: {res['error']}")
            out.append(res)
    return out


def count_points(url: str, db: str) -> dict[str, int]:
    """Points per measurement in database ``db`` (every row read back)."""
    names = []
    for res in _query(url, db, "SHOW MEASUREMENTS"):
        for s in res.get("series", []):
            names += [v[0] for v in s.get("values", [])]
    counts = {}
    for m in names:
        n = 0
        quoted = '"' + m.replace("\\", "\\\\").replace('"', '\\"') + '"'
        for res in _query(url, db, f"SELECT * FROM {quoted}", chunked=True):
            for s in res.get("series", []):
                n += len(s.get("values", []))
        counts[m] = n
    return counts
