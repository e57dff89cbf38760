"""Every program in p4/ compiles with real p4c for BMv2 (v1model), through the
content cache the test bed and the controller use; and the P4Info p4c writes is the
one softswitch builds, so the controller sees one schema on both targets."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from bmv2_helpers import PROGRAMS, require_tools

from controller.p4rt import compile_bmv2_cached, load_pipeline, read_p4info

pytestmark = [pytest.mark.bmv2, pytest.mark.slow]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_p4c_compiles_every_program(program: Path, tmp_path: Path) -> None:
    require_tools()
    js, info = compile_bmv2_cached(program, tmp_path)
    assert js.read_text().lstrip().startswith("{") and '"pipelines"' in js.read_text()
    assert read_p4info(info).tables or read_p4info(info).actions
    # the second time it comes from the cache: same files, untouched
    stamp = js.stat().st_mtime_ns
    assert compile_bmv2_cached(program, tmp_path) == (js, info)
    assert js.stat().st_mtime_ns == stamp
    assert len(list(tmp_path.iterdir())) == 1     # one folder per content, no leftovers


def test_cache_key_follows_the_content(tmp_path: Path) -> None:
    require_tools()
    src = tmp_path / "src"
    src.mkdir()
    prog = src / "prog.p4"
    prog.write_text(PROGRAMS[1].read_text())
    cache = tmp_path / "cache"
    first, _ = compile_bmv2_cached(prog, cache)
    prog.write_text(prog.read_text() + "\n// changed\n")
    os.utime(prog)
    second, _ = compile_bmv2_cached(prog, cache)
    assert first != second and first.is_file() and second.is_file()


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.stem)
def test_p4info_of_p4c_equals_softswitchs(program: Path) -> None:
    require_tools()
    """What the controller gets for --target bmv2 (p4c's P4Info) and for softswitch
    (built from the source) is one message."""
    bmv2 = load_pipeline(target="bmv2", program=program).p4info
    soft = load_pipeline(target="softswitch", program=program).p4info
    assert bmv2 == soft
