"""P4_16 front end: preprocess, parse and check a program into a ``CheckedProgram``.

Public API: ``load_program(path, *, include_dirs=(), defines=None)`` and
``load_source(text, *, filename="<string>", include_dirs=(), defines=None)``; both
raise ``P4Error`` (rendered ``file:line:col: error: message``).  See ``ast`` for how
to read the checked tree and ``types`` for resolved types.
"""
from __future__ import annotations

from .ast import CheckedProgram, MainPackage, PackageBlock, SourceLoc
from .errors import P4Error, P4Unsupported
from .load import load_program, load_source

__all__ = [
           "CheckedProgram",
           "MainPackage",
           "P4Error",
           "P4Unsupported",
           "PackageBlock",
           "SourceLoc",
           "load_program",
           "load_source",
]
