"""Real database servers for export tests: Debian's influxd 1.6.7 and victoria-metrics.

Each server runs on a free loopback port with all its files in a temp directory,
is stopped by PID (SIGTERM, then SIGKILL: common.processes) and can be restarted on the same port
and data, which is how the tests make an outage.  Instances started by the
system packages are never touched.
"""
from __future__ import annotations

import json
import os
import shutil
import urllib.parse
import urllib.request
from pathlib import Path

from bench.soak_influx import PrivateInfluxd
from common.processes import PrivateServer, free_loopback_port

INFLUXD = "/usr/bin/influxd"
VICTORIA = "/usr/bin/victoria-metrics"


def _get(url: str, data: bytes | None = None, timeout: float = 5.0) -> bytes:
    req = urllib.request.Request(url, data=data)
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return r.read()


class _Server(PrivateServer):
    def __init__(self, workdir: Path, binary: str) -> None:
        super().__init__(workdir, binary, free_loopback_port())

    def ready(self) -> bool:
        try:
            _get(self.url + "/ping", timeout=0.5)
            return True
        except OSError:
            return False

    def __enter__(self):  # type: ignore[no-untyped-def]
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Influxd16(PrivateInfluxd):
    """influxd 1.x with meta/data/wal in the work dir, HTTP and RPC on free ports."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, binary=INFLUXD)

    def query(self, db: str, q: str) -> dict:
        url = f"{self.url}/query?" + urllib.parse.urlencode({"db": db, "q": q, "epoch": "ns"})
        return json.loads(_get(url))

    def count(self, db: str, measurement: str, field: str) -> int:
        res = self.query(db, f'SELECT COUNT("{field}") FROM "{measurement}"')["results"][0]
        series = res.get("series")
        return int(series[0]["values"][0][1]) if series else 0


class VictoriaMetrics(_Server):
    """victoria-metrics single node: /api/v2/write (influx line protocol) on a free port."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, VICTORIA)

    def argv(self) -> list[str]:
        return [self.binary, f"-storageDataPath={self.workdir / 'data'}",
                f"-httpListenAddr=127.0.0.1:{self.port}", "-retentionPeriod=100y",
                "-search.disableCache"]

    def samples(self, metric_regex: str) -> dict[str, list[int]]:
        """Timestamps (ms) per series name matching ``metric_regex``."""
        _get(self.url + "/internal/force_flush")
        body = urllib.parse.urlencode({"match[]": '{__name__=~"' + metric_regex + '"}'}).encode()
        out: dict[str, list[int]] = {}
        for line in _get(self.url + "/api/v1/export", data=body).decode().splitlines():
            if line:
                rec = json.loads(line)
                key = ",".join(f"{k}={v}" for k, v in sorted(rec["metric"].items()))
                out.setdefault(key, []).extend(rec["timestamps"])
        return out


def have(binary: str) -> bool:
    return os.access(binary, os.X_OK) or shutil.which(os.path.basename(binary)) is not None
