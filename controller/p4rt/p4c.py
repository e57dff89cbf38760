"""Compile a P4 program for BMv2 with p4c, once per content (JSON + P4Info, cached).

Why a cache: the test bed starts one ``simple_switch_grpc`` per switch and the
controller pushes the same compiled pipeline to each; compiling once and keying the
result by what went into it (every ``.p4`` file of the program's folder, the main
file's name and the compiler binary) makes a second run skip p4c and can never hand
out a stale JSON.  p4c is optional: without it the error says what to give instead.

The cache lives in ``$P4C_CACHE_DIR``, else ``$XDG_CACHE_HOME/int-rocev2/p4c`` (by
default ``~/.cache/int-rocev2/p4c``), one folder per key holding
``<stem>.json`` and ``<stem>.p4info.txtpb``; a folder appears only complete (it is
built beside and renamed), so parallel compilations of one program are safe.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from .errors import PipelineError

__all__ = ["cache_dir", "compile_bmv2", "compile_bmv2_cached", "find_p4c"]


def find_p4c() -> str | None:
    """The p4c driver (``p4c``) or its BMv2 back end (``p4c-bm2-ss``) on PATH."""
    return shutil.which("p4c") or shutil.which("p4c-bm2-ss")


def cache_dir() -> Path:
    """Where compiled programs are kept (see the module docstring)."""
    env = os.environ.get("P4C_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "int-rocev2" / "p4c"


def _p4c_or_fail(program: str | Path) -> str:
    p4c = find_p4c()
    if p4c is None:
        raise PipelineError(f"target bmv2: p4c is not on PATH to compile {program}; install p4c "
                            "(scripts/install_p4_tools.sh SRC DEST installs a prebuilt one and "
                            "prints the PATH to use), or give `controller run` a compiled "
                            "--bmv2-json and --p4info")
    return p4c


def compile_bmv2(program: str | Path, out_dir: str | Path | None = None) -> tuple[Path, Path]:
    """Compile `program` with p4c for BMv2 (v1model): (JSON, P4Info text file).  The
    files go to `out_dir` (default: a fresh temporary folder)."""
    p4c = _p4c_or_fail(program)
    src = Path(program)
    if not src.is_file():
        raise PipelineError(f"P4 program {src}: no such file")
    out = Path(out_dir) if out_dir is not None else Path(tempfile.mkdtemp(prefix="p4c-bmv2-"))
    out.mkdir(parents=True, exist_ok=True)
    js, info = out / f"{src.stem}.json", out / f"{src.stem}.p4info.txtpb"
    if Path(p4c).name == "p4c-bm2-ss":
        argv = [p4c, "--arch", "v1model", "-o", str(js), "--p4runtime-files", str(info), str(src)]
    else:
        argv = [p4c, "--target", "bmv2", "--arch", "v1model", "-o", str(out),
                "--p4runtime-files", str(info), str(src)]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PipelineError(f"p4c on {src}: {exc}") from None
    if r.returncode != 0 or not js.is_file():
        raise PipelineError(f"p4c on {src} failed (exit {r.returncode}): "
                            f"{(r.stderr or r.stdout).strip()[-2000:]}")
    return js, info


def _key(program: Path, p4c: str) -> str:
    h = hashlib.sha256()
    st = Path(p4c).resolve().stat()
    h.update(f"{Path(p4c).resolve()}\0{st.st_size}\0{st.st_mtime_ns}\0{program.name}\0".encode())
    for f in sorted(program.parent.rglob("*.p4")):
        h.update(f.relative_to(program.parent).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(f.read_bytes()).digest())
    return h.hexdigest()[:24]


def compile_bmv2_cached(program: str | Path, cache: str | Path | None = None) -> tuple[Path, Path]:
    """:func:`compile_bmv2` through the content cache: (JSON, P4Info text file)."""
    p4c = _p4c_or_fail(program)
    src = Path(program).resolve()
    if not src.is_file():
        raise PipelineError(f"P4 program {program}: no such file")
    root = Path(cache) if cache is not None else cache_dir()
    final = root / f"{src.stem}-{_key(src, p4c)}"
    js, info = final / f"{src.stem}.json", final / f"{src.stem}.p4info.txtpb"
    if js.is_file() and info.is_file():
        return js, info
    try:
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=f".{src.stem}-", dir=root))
    except OSError as exc:
        raise PipelineError(f"p4c cache {root}: cannot write: {exc.strerror}") from None
    try:
        compile_bmv2(src, work)
        try:
            work.rename(final)
        except OSError:  # another run finished first: its result is the same
            if not js.is_file():
                raise
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)
    return js, info
