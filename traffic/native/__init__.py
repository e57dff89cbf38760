"""The native engine's shared library, ``libtnengine.so``, loaded with ctypes.

Why ctypes: the library is plain C built by the project's own install step
(``make -C traffic/native``, run by ``scripts/bootstrap.sh``), and ctypes releases the
GIL during every foreign call, so an engine thread and Python threads run together.
One loader for every wrapper: the library is found next to this file, loaded once,
and a missing build is a clear :class:`NativeLibraryError` that says how to build it.
"""
from __future__ import annotations

import ctypes
import threading
from pathlib import Path

from traffic.errors import TrafficError

__all__ = ["LIB_PATH", "NATIVE_DIR", "NativeLibraryError", "load_library"]

NATIVE_DIR = Path(__file__).resolve().parent
LIB_PATH = NATIVE_DIR / "libtnengine.so"

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None


class NativeLibraryError(TrafficError, RuntimeError):
    """The native engine is not built, or cannot be loaded."""


def build_command() -> str:
    """The command that builds the library (what the error messages tell the user)."""
    return f"make -C {NATIVE_DIR}  (scripts/bootstrap.sh runs it; needs gcc and libisal-dev)"


def load_library() -> ctypes.CDLL:
    """The loaded ``libtnengine.so`` (loaded once per process)."""
    global _lib
    with _lock:
        if _lib is None:
            if not LIB_PATH.is_file():
                raise NativeLibraryError(
                    f"native engine not built: {LIB_PATH} is missing; build it with "
                    f"{build_command()}")
            try:
                _lib = ctypes.CDLL(str(LIB_PATH))
            except OSError as e:
                raise NativeLibraryError(
                    f"native engine {LIB_PATH} cannot be loaded ({e}); rebuild it with "
                    f"{build_command()}") from None
        return _lib
