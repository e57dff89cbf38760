"""InfluxDB credentials: from a file or the environment, never from the command line,
never in a URL, never in a log line or the state file.

A credentials file (mode 0600; one readable by others is refused) holds any of::

    token: 0123abcd...        # 2.x/3.x API token
    username: telemetry       # 1.x user (1.8+: sent as the "user:password" token)
    password: s3cret

The environment variables ``INFLUX_TOKEN``, ``INFLUX_USERNAME`` and
``INFLUX_PASSWORD`` fill what the file does not give.  ``Credentials`` does not show
its values in ``repr``, and ``check_url`` refuses a URL carrying ``user:password@``
(a URL is printed in logs and visible to every user in the process list).
"""
from __future__ import annotations

import os
import stat
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from controller.export.errors import ConfigError

__all__ = ["Credentials", "check_url", "load_credentials"]

_KEYS = ("token", "username", "password")


@dataclass(slots=True, frozen=True, kw_only=True)
class Credentials:
    token: str = field(default="", repr=False)
    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)

    def __repr__(self) -> str:   # which are set, never what they are
        given = [k for k in _KEYS if getattr(self, k)]
        return f"Credentials({', '.join(given) or 'none'})"


def load_credentials(path: str | os.PathLike[str] | None = None,
                     env: Mapping[str, str] | None = None) -> Credentials:
    """Credentials from ``path`` (if given), completed from the environment."""
    env = os.environ if env is None else env
    values: dict[str, str] = {}
    if path is not None:
        p = Path(path)
        try:
            mode = p.stat().st_mode
            text = p.read_text()
        except OSError as exc:
            raise ConfigError(f"InfluxDB credentials {p}: {exc.strerror}") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise ConfigError(f"InfluxDB credentials {p}: mode {stat.S_IMODE(mode):04o} lets "
                              f"others read it; chmod 600 {p}")
        try:
            doc = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            raise ConfigError(f"InfluxDB credentials {p}: not YAML (token:, username:, "
                              f"password:)") from None
        if not isinstance(doc, dict) or set(doc) - set(_KEYS):
            extra = sorted(set(doc) - set(_KEYS)) if isinstance(doc, dict) else doc
            raise ConfigError(f"InfluxDB credentials {p}: expected only token, username, "
                              f"password; got {extra!r}"[:200] if not isinstance(doc, dict)
                              else f"InfluxDB credentials {p}: unknown field(s) {extra}")
        values = {k: str(v) for k, v in doc.items() if v is not None}
    for k in _KEYS:
        if k not in values and env.get(f"INFLUX_{k.upper()}"):
            values[k] = env[f"INFLUX_{k.upper()}"]
    return Credentials(token=values.get("token", ""), username=values.get("username"),
                       password=values.get("password"))


def check_url(url: str) -> None:
    """Refuse credentials inside the URL (they would be logged and shown by ps)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"InfluxDB URL {parts.scheme}://***@{parts.hostname}...: "
                          "credentials do not go into the URL; use --influx-credentials FILE "
                          "or INFLUX_USERNAME / INFLUX_PASSWORD / INFLUX_TOKEN")
