"""The loader: a missing or broken library is a clear error that says how to build it."""
from __future__ import annotations

from pathlib import Path

import pytest

from traffic import native


def test_missing_library_says_how_to_build_it(monkeypatch: pytest.MonkeyPatch,
                                              tmp_path: Path) -> None:
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "LIB_PATH", tmp_path / "libtnengine.so")
    with pytest.raises(native.NativeLibraryError, match=r"not built.*make -C .*traffic/native"):
        native.load_library()


def test_unloadable_library_says_how_to_rebuild_it(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Path) -> None:
    bad = tmp_path / "libtnengine.so"
    bad.write_bytes(b"not an ELF file")
    monkeypatch.setattr(native, "_lib", None)
    monkeypatch.setattr(native, "LIB_PATH", bad)
    with pytest.raises(native.NativeLibraryError, match="cannot be loaded.*rebuild it with make"):
        native.load_library()


def test_the_built_library_loads_once() -> None:
    assert native.load_library() is native.load_library()
    assert native.load_library().tn_ec_new
