"""Compile and load the project's bcc programs: one place for cflags and source dumps.

Sources live beside this module; parameters go in as ``-D`` cflags built from typed
values (never pasted into C text); ``dump_source`` receives the exact C that is loaded
plus the cflags, for debugging (the ``--dump-c`` flags of the command-line fronts).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from common.kernel.errors import AttachError

from .errors import ConfigError
from .setup_check import check_setup

__all__ = ["SOURCE_DIR", "cflags_for", "compile_program"]

SOURCE_DIR = Path(__file__).resolve().parent


def cflags_for(defines: Mapping[str, int]) -> list[str]:
    """``-D`` flags for integer parameters (names checked, values must be ints)."""
    flags = [f"-I{SOURCE_DIR}"]
    for name, value in defines.items():
        if not name.isidentifier() or not name.isupper():
            raise ConfigError(f"C parameter name {name!r}: expected an upper-case identifier")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"C parameter {name}={value!r}: expected an int")
        flags.append(f"-D{name}={value}")
    return flags


def compile_program(source: str, defines: Mapping[str, int], *,
                    dump_source: TextIO | None = None):  # -> bcc.BPF
    """Compile ``source`` (a file name beside this module) with ``defines``."""
    check_setup()
    from bcc import BPF  # imported late: the setup check explains a missing bcc

    path = SOURCE_DIR / source
    if not path.is_file():
        raise AttachError(f"BPF source {source} not found in {SOURCE_DIR}")
    cflags = cflags_for(defines)
    if dump_source is not None:
        dump_source.write(f"/* {path.name} cflags: {' '.join(cflags)} */\n")
        dump_source.write(path.read_text())
        dump_source.flush()
    try:
        return BPF(src_file=os.fsencode(path), cflags=cflags)
    except Exception as exc:  # noqa: BLE001 - bcc raises bare Exception
        raise AttachError(f"cannot compile {path.name} with {' '.join(cflags[1:])}: {exc}") \
            from None
