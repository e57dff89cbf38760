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


def test_a_library_of_another_api_version_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """A library built from another tn_verbs.h (TN_API_VERSION) is refused with the
    versions and how to rebuild it, before a struct of the wrong layout is passed."""
    from traffic import native_endpoint
    try:
        native.load_library()
    except native.NativeLibraryError as e:
        pytest.skip(f"native library not built: {e}")
    monkeypatch.setattr(native_endpoint, "_BOUND", False)
    monkeypatch.setattr(native_endpoint, "API_VERSION", native_endpoint.API_VERSION + 1)
    with pytest.raises(native.NativeLibraryError,
                       match=r"API version \d+, this binding \d+: rebuild it"):
        native_endpoint._bind()
