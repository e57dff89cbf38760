"""C preprocessor step: ``#include``, ``#define``, ``#if`` via the system ``cpp``.

Why the real cpp: P4 programs rely on its exact behaviour (macros with arguments,
include search order, ``#if`` arithmetic).  We keep its line markers so every later
error points at the user's file and line; ``LineMap`` translates.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from .ast import SourceLoc
from .errors import P4PreprocessError

#: Our own ``core.p4`` / ``v1model.p4`` live here; always on the include path.
P4INCLUDE_DIR = Path(__file__).resolve().parent.parent / "p4include"

_MARKER = re.compile(r'^#\s*(?:line\s+)?(\d+)\s+"((?:\\.|[^"\\])*)"')
_CPP_DIAG = re.compile(r"^(.*?):(\d+):(?:(\d+):)?\s*(?:fatal )?error:\s*(.*)$")


@dataclass(slots=True)
class LineMap:
    """Maps a line of the preprocessed text (1-based) to (file, line) in the sources."""

    entries: list[tuple[str, int]] = field(default_factory=list)

    def loc(self, line: int, col: int) -> SourceLoc:
        if 1 <= line <= len(self.entries):
            fname, fline = self.entries[line - 1]
            return SourceLoc(fname, fline, col)
        return SourceLoc("<unknown>", line, col)

    def files(self) -> list[str]:
        seen: dict[str, None] = {}
        for fname, _ in self.entries:
            seen.setdefault(fname, None)
        return list(seen)


def build_line_map(text: str, default_file: str) -> LineMap:
    """Read cpp line markers (``# 12 "file.p4" 2``) from preprocessed text."""
    entries: list[tuple[str, int]] = []
    cur_file, cur_line = default_file, 1
    for raw in text.split("\n"):
        m = _MARKER.match(raw)
        if m:
            entries.append((cur_file, cur_line))
            cur_line = int(m.group(1))
            cur_file = m.group(2).encode().decode("unicode_escape") if "\\" in m.group(2) else m.group(2)
            continue
        entries.append((cur_file, cur_line))
        cur_line += 1
    return LineMap(entries)


def _cpp_command(include_dirs: tuple[str, ...] | list[str], defines: dict[str, str] | None) -> list[str]:
    cpp = shutil.which("cpp")
    if cpp is None:
        raise P4PreprocessError(None, "the C preprocessor 'cpp' is not installed (apt-get install cpp)")
    cmd = [cpp, "-undef", "-nostdinc", "-x", "c", "-w"]
    for d in include_dirs:
        cmd += ["-I", str(d)]
    cmd += ["-I", str(P4INCLUDE_DIR)]
    for name, value in (defines or {}).items():
        cmd.append(f"-D{name}" if value is None or value == "" else f"-D{name}={value}")
    return cmd


def preprocess(
    text: str,
    *,
    filename: str,
    include_dirs: tuple[str, ...] | list[str] = (),
    defines: dict[str, str] | None = None,
) -> tuple[str, LineMap]:
    """Run cpp over ``text`` (named ``filename`` in diagnostics); return text and line map."""
    cmd = _cpp_command(include_dirs, defines)
    base_dir = str(Path(filename).resolve().parent) if not filename.startswith("<") else None
    if base_dir is not None:
        cmd += ["-I", base_dir]  # quote includes relative to the file, as with a real path
    cmd.append("-")
    escaped = filename.replace("\\", "\\\\").replace('"', '\\"')
    source = f'# 1 "{escaped}"\n{text}'
    proc = subprocess.run(cmd, input=source, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        for line in proc.stderr.splitlines():
            m = _CPP_DIAG.match(line)
            if m:
                loc = SourceLoc(m.group(1), int(m.group(2)), int(m.group(3) or 1))
                raise P4PreprocessError(loc, m.group(4))
        raise P4PreprocessError(SourceLoc(filename, 1, 1), f"preprocessor failed: {proc.stderr.strip()}")
    return proc.stdout, build_line_map(proc.stdout, filename)
