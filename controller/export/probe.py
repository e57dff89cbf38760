"""Identify the server behind a URL: InfluxDB 1.x /write or the /api/v2 write API.

1. ``GET /ping``: InfluxDB answers 204 with ``X-Influxdb-Version``.  2.x/3.x and
   1.8+ (which has the /api/v2 compatibility endpoints) use the v2 API; older 1.x
   (e.g. Debian's 1.6.7) use /write.
2. No version header (other servers speaking the protocol): an empty
   ``POST /api/v2/write`` tells whether that endpoint exists (anything but 404/405)
   — the answer's version header is used when present.
"""
from __future__ import annotations

import enum
import http.client
import re
from dataclasses import dataclass

from controller.export.errors import ProbeError
from controller.export.sinks import _http


class ServerKind(enum.Enum):
    INFLUX_V1_WRITE = "influxdb-v1-write"
    V2_API = "influxdb-v2-api"


@dataclass(slots=True, kw_only=True, frozen=True)
class ServerInfo:
    url: str
    kind: ServerKind
    version: str | None
    product: str | None = None


def _version_tuple(v: str) -> tuple[int, int]:
    m = re.match(r"v?(\d+)\.(\d+)", v)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def probe(url: str, *, timeout_s: float = 3.0) -> ServerInfo:
    """What speaks at ``url`` (raises ProbeError when nothing answers or it is not InfluxDB-like)."""
    base = url.rstrip("/")
    try:
        status, _, headers = _http("GET", f"{base}/ping", None, timeout_s)
    except (OSError, http.client.HTTPException) as exc:
        raise ProbeError(f"no InfluxDB-compatible server at {base}: {exc}") from None
    h = {k.lower(): v for k, v in headers.items()}
    version = h.get("x-influxdb-version")
    product = h.get("x-influxdb-build")
    if status in (200, 204) and version:
        major, minor = _version_tuple(version)
        if major >= 2 or (major == 1 and minor >= 8):
            return ServerInfo(url=base, kind=ServerKind.V2_API, version=version, product=product)
        return ServerInfo(url=base, kind=ServerKind.INFLUX_V1_WRITE, version=version,
                          product=product)
    try:
        status2, _, headers2 = _http("POST", f"{base}/api/v2/write?org=probe&bucket=probe", b"",
                                     timeout_s)
    except (OSError, http.client.HTTPException) as exc:
        raise ProbeError(f"server at {base}: /api/v2/write probe failed: {exc}") from None
    if status2 not in (404, 405):
        v2 = {k.lower(): v for k, v in headers2.items()}.get("x-influxdb-version")
        return ServerInfo(url=base, kind=ServerKind.V2_API, version=v2, product=product)
    if status in (200, 204):
        return ServerInfo(url=base, kind=ServerKind.INFLUX_V1_WRITE, version=None, product=product)
    raise ProbeError(
        f"server at {base} is not InfluxDB-compatible: /ping answered {status}, "
        f"/api/v2/write answered {status2}")
