"""Key files: the shared secrets of ``formats.auth`` frames, read from a file only.

A key file is YAML, mode 0600 (a file others can read is refused)::

    sign: 2                       # key id this process signs with
    keys:
      - {id: 1, secret: 5f0c...}  # hex, at least 16 bytes; kept while keys rotate
      - {id: 2, secret: 9ab1...}
      - {id: 7, secret: 01de..., senders: [167772162]}   # a per-agent key
    senders: [1, 167772161, 167772162]   # optional: who may send to us at all

Every listed key is accepted; a key with ``senders`` only from those senders (one
key per agent, so one agent's key cannot speak for another).  Without a top-level
``senders`` list any sender holding a valid key is accepted.

Rotation without losing records: add the new key to every receiver's file, then
switch ``sign`` to it everywhere, then remove the old key.  ``KeyFile`` re-reads
the file when it changes (checked at most once per ``recheck_s``), so no process
restarts and both keys are valid in between.
"""
from __future__ import annotations

import os
import secrets
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from formats.auth import MIN_KEY_LEN

__all__ = ["KeyFile", "KeyFileError", "KeyRing", "generate_key_file", "load_key_ring"]


class KeyFileError(ValueError):
    """A key file is missing, readable by others or malformed (names file and field)."""


@dataclass(slots=True, frozen=True, kw_only=True)
class KeyRing:
    """Keys by id, the one to sign with, and who may send."""

    keys: dict[int, bytes]
    sign_key_id: int
    key_senders: dict[int, frozenset[int]] = field(default_factory=dict)
    """Key id -> the only senders that may use it (per-agent keys)."""
    senders: frozenset[int] | None = None
    """Senders accepted at all (None: any holder of a valid key)."""

    def __post_init__(self) -> None:
        if self.sign_key_id not in self.keys:
            raise KeyFileError(f"sign key {self.sign_key_id} is not among the keys "
                               f"{sorted(self.keys)}")
        for kid, secret in self.keys.items():
            if not 0 <= kid <= 0xFFFF:
                raise KeyFileError(f"key id {kid}: expected 0..65535")
            if len(secret) < MIN_KEY_LEN:
                raise KeyFileError(f"key {kid}: {len(secret)} bytes, at least {MIN_KEY_LEN}")

    @property
    def sign_key(self) -> bytes:
        return self.keys[self.sign_key_id]


def _int(v: object, where: str) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise KeyFileError(f"{where}: {v!r} is not an integer")
    return v


def _senders(v: object, where: str) -> frozenset[int]:
    if not isinstance(v, list):
        raise KeyFileError(f"{where}: expected a list of sender ids, got {v!r}")
    return frozenset(_int(s, where) for s in v)


def parse_key_ring(text: str, where: str = "key file") -> KeyRing:
    """A ``KeyRing`` from the YAML text of a key file."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KeyFileError(f"{where}: not YAML ({exc})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list) or not doc["keys"]:
        raise KeyFileError(f"{where}: expected a mapping with a non-empty 'keys' list")
    keys: dict[int, bytes] = {}
    key_senders: dict[int, frozenset[int]] = {}
    for i, entry in enumerate(doc["keys"]):
        at = f"{where}: keys[{i}]"
        if not isinstance(entry, dict):
            raise KeyFileError(f"{at}: expected a mapping with id and secret")
        kid = _int(entry.get("id"), f"{at}.id")
        try:
            secret = bytes.fromhex(str(entry.get("secret", "")))
        except ValueError:
            raise KeyFileError(f"{at}.secret: not hexadecimal") from None
        if kid in keys:
            raise KeyFileError(f"{at}: key id {kid} given twice")
        keys[kid] = secret
        if "senders" in entry:
            key_senders[kid] = _senders(entry["senders"], f"{at}.senders")
    sign = _int(doc.get("sign", next(iter(keys))), f"{where}: sign")
    senders = _senders(doc["senders"], f"{where}: senders") if "senders" in doc else None
    try:
        return KeyRing(keys=keys, sign_key_id=sign, key_senders=key_senders, senders=senders)
    except KeyFileError as exc:
        raise KeyFileError(f"{where}: {exc}") from None


def load_key_ring(path: str | os.PathLike[str]) -> KeyRing:
    """Read and check a key file (refused when group or others may read it)."""
    p = Path(path)
    try:
        st = p.stat()
        text = p.read_text()
    except OSError as exc:
        raise KeyFileError(f"key file {p}: {exc.strerror}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise KeyFileError(f"key file {p}: mode {stat.S_IMODE(st.st_mode):04o} lets others read "
                           f"it; chmod 600 {p}")
    return parse_key_ring(text, f"key file {p}")


class KeyFile:
    """The current ``KeyRing`` of a file, re-read when the file changes (rotation).

    A change that does not parse keeps the previous keys (and ``reload_errors`` counts
    it), so a half-written file never leaves a process without keys."""

    def __init__(self, path: str | os.PathLike[str], *, recheck_s: float = 1.0) -> None:
        self.path = Path(path)
        self.recheck_s = recheck_s
        self._ring = load_key_ring(self.path)
        self._mtime = self.path.stat().st_mtime_ns
        self._next_check = time.monotonic() + recheck_s
        self.reloads = 0
        self.reload_errors = 0

    @classmethod
    def from_ring(cls, ring: KeyRing) -> KeyFile:
        """Keys held in memory only (tests, generated deployments)."""
        kf = cls.__new__(cls)
        kf.path, kf.recheck_s, kf._ring = Path(), float("inf"), ring
        kf._mtime, kf._next_check, kf.reloads, kf.reload_errors = 0, float("inf"), 0, 0
        return kf

    def ring(self) -> KeyRing:
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + self.recheck_s
            self.reload()
        return self._ring

    def reload(self, force: bool = False) -> bool:
        """Re-read the file if it changed (or ``force``); True when new keys are in use."""
        try:
            mtime = self.path.stat().st_mtime_ns
        except OSError:
            self.reload_errors += 1
            return False
        if mtime == self._mtime and not force:
            return False
        try:
            self._ring = load_key_ring(self.path)
        except KeyFileError:
            self.reload_errors += 1
            return False
        self._mtime = mtime
        self.reloads += 1
        return True


def generate_key_file(path: str | os.PathLike[str], *, senders: Iterable[int] | None = None,
                      key_ids: Iterable[int] = (1,), sign: int | None = None) -> KeyRing:
    """Write a new key file with fresh random keys (mode 0600, created so before any
    secret is written); returns its ring."""
    ids = list(key_ids)
    keys = {kid: secrets.token_bytes(32) for kid in ids}
    ring = KeyRing(keys=keys, sign_key_id=ids[0] if sign is None else sign,
                   senders=None if senders is None else frozenset(senders))
    write_key_file(path, ring)
    return ring


def write_key_file(path: str | os.PathLike[str], ring: KeyRing) -> None:
    """Write ``ring`` as a key file, mode 0600 (replacing the file atomically)."""
    doc: dict[str, object] = {"sign": ring.sign_key_id, "keys": [
        {"id": kid, "secret": sec.hex(),
         **({"senders": sorted(ring.key_senders[kid])} if kid in ring.key_senders else {})}
        for kid, sec in ring.keys.items()]}
    if ring.senders is not None:
        doc["senders"] = sorted(ring.senders)
    p = Path(path)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write("# formats.auth keys; keep this file mode 0600\n")
            yaml.safe_dump(doc, fh, sort_keys=False)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, p)
