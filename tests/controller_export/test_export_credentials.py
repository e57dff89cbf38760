"""InfluxDB credentials from a file or the environment, never from the command line,
a URL, a log line or the controller's state file."""
from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from controller.export.credentials import check_url, load_credentials
from controller.export.errors import ConfigError
from controller.export.runner import InfluxTarget, open_exporter

SECRET = "tok-9f2c-VERY-SECRET"


@pytest.fixture
def refusing_v2() -> Iterator[tuple[str, list[dict[str, str]]]]:
    """An InfluxDB 2.x lookalike that refuses every write with 401."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _answer(self, code: int, body: bytes = b"") -> None:
            self.send_response(code)
            self.send_header("X-Influxdb-Version", "v2.7.4")
            self.send_header("X-Influxdb-Build", "OSS")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self._answer(204 if self.path.startswith("/ping") else 404)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(dict(self.headers))
            self._answer(401, b'{"code":"unauthorized","message":"unauthorized access"}')

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}", seen
    finally:
        srv.shutdown()
        srv.server_close()


def test_file_then_environment(tmp_path: Path) -> None:
    f = tmp_path / "influx.yaml"
    f.write_text(f"token: {SECRET}\n")
    f.chmod(0o600)
    c = load_credentials(f, env={"INFLUX_USERNAME": "u", "INFLUX_PASSWORD": "p",
                                 "INFLUX_TOKEN": "other"})
    assert (c.token, c.username, c.password) == (SECRET, "u", "p")
    assert SECRET not in repr(c) and "token" in repr(c)
    assert load_credentials(None, env={"INFLUX_TOKEN": SECRET}).token == SECRET
    assert SECRET not in repr(InfluxTarget(token=SECRET, password=SECRET))
    f.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        load_credentials(f)
    f.chmod(0o600)
    f.write_text("tokn: x\n")
    with pytest.raises(ConfigError, match="unknown field"):
        load_credentials(f)
    with pytest.raises(ConfigError, match="credentials do not go into the URL"):
        check_url(f"http://admin:{SECRET}@127.0.0.1:8086")
    with pytest.raises(ConfigError) as ei:
        open_exporter(f"http://admin:{SECRET}@127.0.0.1:8086", out_dir=tmp_path)
    assert SECRET not in str(ei.value)


def test_secret_reaches_the_server_but_no_log(refusing_v2, tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture) -> None:
    url, seen = refusing_v2
    with caplog.at_level(logging.DEBUG):
        ex = open_exporter(url, out_dir=tmp_path, flush_interval_s=0.02,
                           target=InfluxTarget(org="lab", bucket="tel", token=SECRET))
        ex.write(["m v=1i 1"])
        ex.flush(3)
        ex.close()
    assert seen and seen[-1]["Authorization"] == f"Token {SECRET}"
    assert caplog.records, "the refusal is logged"
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    for root, _dirs, files in os.walk(tmp_path):
        for name in files:
            assert SECRET.encode() not in (Path(root) / name).read_bytes(), name
