"""Build a C helper of this package with gcc at first use and load it (ctypes).

The shared object is cached by the source's hash under ``$XDG_CACHE_HOME/int-controller``
(a new source version builds anew; concurrent builders never load half a file).  No
gcc, or a failed build, gives ``None`` and one log line: every helper has a pure
Python/numpy path that callers fall back to.
"""
from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("controller.int")

__all__ = ["build"]

_built: dict[str, ctypes.CDLL | None] = {}

Signatures = Mapping[str, tuple[Any, Sequence[Any]]]
"""A helper's C functions: name -> (ctypes restype, argtypes), set once when it loads."""


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "int-controller"


def build(name: str, fallback: str, signatures: Signatures | None = None) -> ctypes.CDLL | None:
    """``<name>.c`` next to this module, compiled and loaded once per process, its
    ``signatures`` declared then (a later call returns the same library: cheap enough
    for every receive round); ``fallback`` names what is used instead, for the log line."""
    if name in _built:
        return _built[name]
    src_path = Path(__file__).with_name(f"{name}.c")
    src = src_path.read_bytes()
    so = _cache_dir() / f"{name}-{hashlib.sha256(src).hexdigest()[:16]}.so"
    lib: ctypes.CDLL | None = None
    try:
        if not so.exists():
            gcc = shutil.which("gcc")
            if gcc is None:
                log.info("collector: gcc missing, %s", fallback)
                _built[name] = None
                return None
            so.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=so.parent) as tmp:
                out = Path(tmp) / so.name
                subprocess.run([gcc, "-O2", "-Wall", "-shared", "-fPIC", "-o", str(out),
                                str(src_path)], check=True, capture_output=True, timeout=60)
                os.replace(out, so)
        lib = ctypes.CDLL(str(so))
        for fn, (restype, argtypes) in (signatures or {}).items():
            f = getattr(lib, fn)
            f.restype, f.argtypes = restype, list(argtypes)
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("collector: cannot build %s (%s); %s", src_path.name, exc, fallback)
        lib = None
    _built[name] = lib
    return lib
