"""Probing and the v2 sink against small in-process HTTP servers that imitate
InfluxDB 2.x and 1.8 (the real 1.6.7 and VictoriaMetrics are in test_servers.py)."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from controller.export import ProbeError, ServerKind, open_exporter, probe
from controller.export.runner import InfluxTarget, ProbingSink
from controller.export.sinks import InfluxV2Sink


class Fake:
    def __init__(self, version: str | None, *, v2: bool = True, build: str | None = "OSS",
                 status: int = 204) -> None:
        self.version, self.v2, self.build, self.status = version, v2, build, status
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []


@pytest.fixture
def fake_server(request) -> Iterator[tuple[str, Fake]]:  # type: ignore[no-untyped-def]
    fake: Fake = request.param

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, code: int) -> None:
            self.send_response(code)
            if fake.version:
                self.send_header("X-Influxdb-Version", fake.version)
            if fake.build:
                self.send_header("X-Influxdb-Build", fake.build)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            fake.requests.append(("GET", self.path, dict(self.headers), b""))
            self._answer(204 if self.path.startswith("/ping") else 404)

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            fake.requests.append(("POST", self.path, dict(self.headers), body))
            if self.path.startswith("/api/v2/write"):
                self._answer(fake.status if fake.v2 else 404)
            elif self.path.startswith("/query") or self.path.startswith("/write"):
                self._answer(200 if self.path.startswith("/query") else 204)
            else:
                self._answer(404)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", fake
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("fake_server", [Fake("v2.7.4")], indirect=True)
def test_influxdb2_uses_v2_api_with_token(fake_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, fake = fake_server
    info = probe(url)
    assert info.kind is ServerKind.V2_API and info.version == "v2.7.4"
    ex = open_exporter(url, out_dir=tmp_path, flush_interval_s=0.02,
                       target=InfluxTarget(org="lab", bucket="tel", token="s3cret"))
    ex.write(["m v=1i 1", "m v=2i 2"])
    assert ex.flush(10)
    ex.close()
    assert isinstance(ex.sink, ProbingSink) and isinstance(ex.sink.inner, InfluxV2Sink)
    writes = [r for r in fake.requests if r[0] == "POST" and r[1].startswith("/api/v2/write")]
    q = parse_qs(urlparse(writes[-1][1]).query)
    assert q["org"] == ["lab"] and q["bucket"] == ["tel"] and q["precision"] == ["ns"]
    assert writes[-1][2]["Authorization"] == "Token s3cret"
    assert writes[-1][3].decode().splitlines() == ["m v=1i 1", "m v=2i 2"]


@pytest.mark.parametrize("fake_server", [Fake("1.8.10")], indirect=True)
def test_influxdb18_uses_compat_api_after_creating_database(fake_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, fake = fake_server
    ex = open_exporter(url, out_dir=tmp_path, flush_interval_s=0.02,
                       target=InfluxTarget(database="tel", retention_policy="week",
                                           username="u", password="p"))
    ex.write(["m v=1i 1"])
    assert ex.flush(10)
    ex.close()
    paths = [r[1] for r in fake.requests if r[0] == "POST"]
    assert any(p.startswith("/query") and "CREATE+DATABASE" in p for p in paths)
    w = [r for r in fake.requests if r[1].startswith("/api/v2/write")][-1]
    assert parse_qs(urlparse(w[1]).query)["bucket"] == ["tel/week"]
    assert w[2]["Authorization"] == "Token u:p"


@pytest.mark.parametrize("fake_server", [Fake("1.7.11")], indirect=True)
def test_influxdb17_uses_v1_write(fake_server) -> None:  # type: ignore[no-untyped-def]
    url, _ = fake_server
    assert probe(url).kind is ServerKind.INFLUX_V1_WRITE


@pytest.mark.parametrize("fake_server", [Fake(None, v2=False, build=None)], indirect=True)
def test_unversioned_server_without_v2_is_v1(fake_server) -> None:  # type: ignore[no-untyped-def]
    url, _ = fake_server
    assert probe(url).kind is ServerKind.INFLUX_V1_WRITE


def test_nothing_listening_is_a_probe_error() -> None:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ProbeError, match=f"no InfluxDB-compatible server at http://127.0.0.1:{port}"):
        probe(f"http://127.0.0.1:{port}", timeout_s=1)


@pytest.mark.parametrize("fake_server", [Fake("v2.7.4", status=400)], indirect=True)
def test_v2_refusal_is_kept_as_rejected(fake_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, _ = fake_server
    ex = open_exporter(url, out_dir=tmp_path, flush_interval_s=0.02)
    ex.write(["m v=1i 1"])
    assert ex.flush(10)
    ex.close()
    assert ex.stats.lines_rejected == 1
    assert list((tmp_path / "spool" / "rejected").glob("*.lp"))


@pytest.mark.parametrize("fake_server", [Fake("1.6.7~rc0", v2=False)], indirect=True)
def test_influxdb16_v1_write_with_credentials(fake_server, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    url, fake = fake_server
    ex = open_exporter(url, out_dir=tmp_path, flush_interval_s=0.02,
                       target=InfluxTarget(database="tel", retention_policy="week",
                                           username="u", password="p w"))
    ex.write(["m v=1i 1"])
    assert ex.flush(10)
    ex.close()
    posts = [r for r in fake.requests if r[0] == "POST"]
    create = parse_qs(urlparse(posts[0][1]).query)
    assert create["q"] == ['CREATE DATABASE "tel"'] and create["u"] == ["u"]
    write = parse_qs(urlparse(posts[-1][1]).query)
    assert urlparse(posts[-1][1]).path == "/write"
    assert write == {"db": ["tel"], "precision": ["ns"], "rp": ["week"], "u": ["u"], "p": ["p w"]}
    assert posts[-1][3] == b"m v=1i 1\n"
