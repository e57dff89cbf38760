"""Entry points: file or text -> preprocessed -> parsed -> checked program."""
from __future__ import annotations

from pathlib import Path

from .ast import CheckedProgram, SourceLoc
from .checker import Checker
from .errors import P4Error, P4PreprocessError
from .parser import parse_text
from .preprocess import preprocess


def load_source(text: str, *, filename: str = "<string>", include_dirs: tuple[str, ...] | list[str] = (),
                defines: dict[str, str] | None = None) -> CheckedProgram:
    """Check P4 source ``text``; errors name ``filename``.  Raises ``P4Error``."""
    pre, linemap = preprocess(text, filename=filename, include_dirs=include_dirs, defines=defines)
    prog = parse_text(pre, linemap)
    checked = Checker().check_program(prog)
    checked.source_files = linemap.files()
    return checked


def load_program(path: str | Path, *, include_dirs: tuple[str, ...] | list[str] = (),
                 defines: dict[str, str] | None = None) -> CheckedProgram:
    """Read, preprocess, parse and check the P4 program at ``path``.  Raises ``P4Error``."""
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as exc:
        raise P4PreprocessError(SourceLoc(str(path), 0, 0), f"cannot read program: {exc.strerror}") from None
    return load_source(text, filename=str(path), include_dirs=include_dirs, defines=defines)


__all__ = ["P4Error", "load_program", "load_source"]
