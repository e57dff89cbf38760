"""``python -m softswitch check``: silent success, located errors, P4Info output."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2

HERE = Path(__file__).parent
ROOT = HERE.parent.parent


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softswitch", "check", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_check_ok_is_silent_and_writes_p4info(tmp_path):
    out = tmp_path / "basic.p4info.txtpb"
    proc = _run(str(HERE / "programs" / "basic.p4"), "--p4info", str(out))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")
    info = text_format.Parse(out.read_text(), p4info_pb2.P4Info())
    assert info.tables[0].preamble.name == "MyIngress.ipv4_lpm"


def test_check_error_exit_1_with_location(tmp_path):
    prog = tmp_path / "bad.p4"
    prog.write_text("#include <v1model.p4>\ncontrol C(inout bit<8> x) {\n    apply { x = y; }\n}\n")
    proc = _run(str(prog))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == f"{prog}:3:17: error: undeclared name 'y'\n"


def test_include_dirs_and_defines(tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "w.p4").write_text("const bit<8> W = WIDTH;\n")
    prog = tmp_path / "p.p4"
    prog.write_text("#include <core.p4>\n#include <w.p4>\n")
    assert _run(str(prog), "-I", str(inc), "-D", "WIDTH=3").returncode == 0
    proc = _run(str(prog), "-I", str(inc))
    assert proc.returncode == 1 and "error: undeclared name 'WIDTH'" in proc.stderr
    proc = _run(str(prog))
    assert proc.returncode == 1 and proc.stderr == f"{prog}:2:10: error: w.p4: No such file or directory\n"


def test_bad_define_rejected_by_argparse():
    proc = _run("x.p4", "-D", "1BAD=2")
    assert proc.returncode == 2 and "bad macro name" in proc.stderr


def test_missing_program_file(tmp_path):
    proc = _run(str(tmp_path / "nope.p4"))
    assert proc.returncode == 1 and "error: cannot read program" in proc.stderr
