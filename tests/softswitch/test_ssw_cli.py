"""The run, stf and demo commands as a user runs them (subprocesses, exit codes, output)."""
from __future__ import annotations

import subprocess
import sys

from ssw_helpers import EXAMPLES, ROOT

CONF = ROOT / "tests" / "conformance"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "softswitch", *args], cwd=ROOT, capture_output=True, check=False,
                          text=True, timeout=120)


def test_stf_exit_codes(tmp_path):
    ok = cli("stf", str(CONF / "h4_parser.p4"), str(CONF / "h4_parser.stf"))
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "PASS" in ok.stdout
    bad = tmp_path / "bad.stf"
    bad.write_text("packet 0 1A 05 BEEF 99\nexpect 2 0100 1A 05 BEEF 98$\n")
    fail = cli("stf", str(CONF / "h4_parser.p4"), str(bad))
    assert fail.returncode == 1
    assert "bad.stf:2: packet 1 on port 2 differs" in fail.stdout
    broken = tmp_path / "broken.p4"
    broken.write_text("header h { bit<8> x }\n")
    err = cli("stf", str(broken), str(bad))
    assert err.returncode == 2
    assert "broken.p4:1:" in err.stderr and "error:" in err.stderr


def test_stf_strict_watches_every_port(tmp_path):
    """By default only ports the test names are watched (as p4c's runner); --strict
    fails on a packet sent anywhere else."""
    stf = tmp_path / "unnamed.stf"
    stf.write_text("packet 0 1A 05 BEEF 99\n")
    lenient = cli("stf", str(CONF / "h4_parser.p4"), str(stf))
    assert lenient.returncode == 0, lenient.stdout + lenient.stderr
    strict = cli("stf", "--strict", str(CONF / "h4_parser.p4"), str(stf))
    assert strict.returncode == 1
    assert "unexpected packet 1 on port 2" in strict.stdout


def test_run_prints_outputs_and_trace():
    pkt = "00000000010000000000000108004500002100010000401163c90a0001010a00020204d20050000d9fdd68656c6c6f"
    r = cli("run", str(EXAMPLES / "ipv4_forward.p4"), "--entries", str(EXAMPLES / "ipv4_forward.entries"),
            "--port", "1", "--packet", pkt)
    assert r.returncode == 0, r.stderr
    assert "out: port 2, 47 bytes: 000000000202000000000100" in r.stdout
    assert "table MyIngress.ipv4_lpm key (0xa000202): hit" in r.stdout
    assert "IP / UDP 10.0.1.1:1234 > 10.0.2.2:80" in r.stdout
    bad = cli("run", str(EXAMPLES / "ipv4_forward.p4"), "--packet", "zz")
    assert bad.returncode == 2 and "not hex" in bad.stderr


def test_demo():
    r = cli("demo")
    assert r.returncode == 0, r.stderr
    assert "out: port 3" in r.stdout and "drop: egress_spec is the drop port" in r.stdout


def test_unsupported_construct_reported_with_location(tmp_path):
    src = (CONF / "h4_parser.p4").read_text().replace(
        "apply {\n        sm.egress_spec = 2;",
        "Blinker() led;\n    apply {\n        led.blink();\n        sm.egress_spec = 2;").replace(
        "header h8_t", "extern Blinker { Blinker(); void blink(); }\nheader h8_t")
    prog = tmp_path / "ext.p4"
    prog.write_text(src)
    r = cli("run", str(prog), "--packet", "1A05")
    assert r.returncode == 2
    assert "ext.p4:" in r.stderr and ": error: unsupported: extern Blinker" in r.stderr


def test_run_json_trace():
    import json
    r = cli("run", str(CONF / "h4_parser.p4"), "--packet", "3000AA", "--json")
    assert r.returncode == 0, r.stderr
    rec = json.loads(r.stdout)
    assert rec["out"] == [{"port": 2, "data": "03023000aa", "instance_type": 0}]
    assert {"kind": "parser_error", "block": "P", "error": "NoMatch"} in rec["events"]
