"""The page's HTTP server: the page, its script, plotly.js and ``/api/view``.

Why the standard library's server: one page polled once a second by a few operators
needs no framework; what matters is that it never slows the controller, so the view
is built at most once per controller tick (cached by the snapshot it came from) and
requests are served from other threads.

Beyond loopback the page carries a token (``?token=...``; generated and printed when
none is given), compared in constant time: the page shows the network's addresses.
"""
from __future__ import annotations

import hmac
import json
import math
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from common.auth.exposure import is_private_testbed

STATIC = Path(__file__).resolve().parent / "static"
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
          ".css": "text/css; charset=utf-8", ".png": "image/png"}


class WebError(ValueError):
    """A bad --web address or a page that cannot be served (the message says which)."""


def parse_web_address(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``:PORT`` (loopback) or ``PORT``; port 0 picks a free one."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = "", text
    host = host.strip("[]") or "127.0.0.1"
    try:
        p = int(port)
    except ValueError:
        raise WebError(f"--web {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080") from None
    if not 0 <= p <= 65535:
        raise WebError(f"--web {text!r}: port {p} outside 0..65535")
    return host, p


def check_web_exposure(host: str, token: str | None) -> str | None:
    """The token the page needs: None on loopback unless one was given; beyond
    loopback the given one or a new random one."""
    if token is not None and len(token) < 16:
        raise WebError("--web-token: use at least 16 characters")
    if token is None and not is_private_testbed(host):
        return secrets.token_urlsafe(18)
    return token


def plotly_js() -> bytes:
    """plotly.min.js from the installed ``plotly`` package (no CDN: the page works offline)."""
    try:
        return resources.files("plotly").joinpath("package_data/plotly.min.js").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise WebError(f"plotly.js not found in the plotly package ({exc}); "
                       "run scripts/bootstrap.sh") from None


@dataclass(slots=True, kw_only=True)
class WebServer:
    """Serves the page; ``view()`` builds the page's model, ``version()`` says when the
    model may have changed (the server rebuilds only then)."""

    view: Callable[[], dict[str, Any]]
    version: Callable[[], object] = lambda: None
    host: str = "127.0.0.1"
    port: int = 0
    token: str | None = None
    requests: int = 0
    rejected: int = 0
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _cache: tuple[object, bytes] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _plotly: bytes | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = str(self._httpd.server_address[0]), int(self._httpd.server_address[1])
        shown = f"[{host}]" if ":" in host else host
        q = f"?token={self.token}" if self.token else ""
        return f"http://{shown}:{port}/{q}"

    def view_bytes(self) -> bytes:
        ver = self.version()
        with self._lock:
            if self._cache is not None and ver is not None and self._cache[0] == ver:
                return self._cache[1]
        body = json.dumps(_finite(self.view()), default=_jsonable).encode()
        with self._lock:
            self._cache = (ver, body)
        return body

    def start(self) -> WebServer:
        self._plotly = plotly_js()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, status: int, body: bytes, ctype: str, cache: bool = False) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=3600" if cache else "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Content-Security-Policy",
                                 "default-src 'self'; style-src 'self' 'unsafe-inline'; "
                                 "img-src 'self' data:; script-src 'self' 'unsafe-eval'")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: HTTPStatus, text: str) -> None:
                self._send(status, json.dumps({"error": text}).encode(), "application/json")

            def do_HEAD(self) -> None:
                self.do_GET()

            def do_GET(self) -> None:
                server.requests += 1
                url = urlsplit(self.path)
                if server.token is not None:
                    given = (parse_qs(url.query).get("token") or [""])[0]
                    auth = self.headers.get("Authorization", "")
                    if auth.startswith("Bearer "):
                        given = auth[7:]
                    if not hmac.compare_digest(given.encode(), server.token.encode()):
                        server.rejected += 1
                        self._error(HTTPStatus.UNAUTHORIZED, "this page needs ?token=... "
                                    "(printed by the command that serves it)")
                        return
                path = url.path
                if path in ("/", "/index.html"):
                    self._send(200, (STATIC / "index.html").read_bytes(), _TYPES[".html"])
                elif path == "/api/view":
                    try:
                        body = server.view_bytes()
                    except Exception as exc:  # noqa: BLE001 - a bad snapshot must not kill the page
                        self._error(HTTPStatus.INTERNAL_SERVER_ERROR, f"view: {exc}")
                        return
                    self._send(200, body, "application/json")
                elif path == "/static/plotly.min.js":
                    assert server._plotly is not None
                    self._send(200, server._plotly, _TYPES[".js"], cache=True)
                elif path.startswith("/static/") and "/" not in path[8:] and \
                        (STATIC / path[8:]).is_file() and (STATIC / path[8:]).suffix in _TYPES:
                    f = STATIC / path[8:]
                    self._send(200, f.read_bytes(), _TYPES[f.suffix])
                else:
                    self._error(HTTPStatus.NOT_FOUND, f"no page {path}")

        try:
            self._httpd = ThreadingHTTPServer((self.host, self.port), Handler)
        except OSError as exc:
            raise WebError(f"--web {self.host}:{self.port}: cannot listen: {exc.strerror or exc}") from None
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="web", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


def _finite(x: Any) -> Any:
    """NaN and infinities become null: the browser's JSON.parse rejects them."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def _jsonable(x: object) -> object:
    if hasattr(x, "item"):
        return x.item()
    if hasattr(x, "tolist"):
        return x.tolist()
    return str(x)
