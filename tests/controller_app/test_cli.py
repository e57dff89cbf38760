"""`python -m controller run/show/entries` as users run it: progress per switch and a
clear message for every failure (unreachable, pipeline rejected, entry rejected)."""
from __future__ import annotations

import re
import shutil
from pathlib import Path

from ctl_app_helpers import ROOT, TOPOFILES, SwitchBed

RUN = ("run", "--once", "--report-port", "0", "--agent-port", "0", "--connect-timeout", "1")


def test_run_once_programs_every_switch_then_show(cli, testbed: SwitchBed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "out"
    r = cli(*RUN, "--topology", str(testbed.topology), "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert f"s1     connecting {testbed.addresses['s1']} device 1" in r.stdout
    assert "s1     ready   pipeline pushed; 31 inserted, 1 modified, 0 deleted" in r.stdout
    assert "s2     ready   pipeline pushed; 15 inserted, 1 modified, 0 deleted" in r.stdout
    assert re.search(r"2/2 switches ready; collector on 127\.0\.0\.1:\d+ \(reports\)", r.stdout)
    # a second run finds everything in place and writes nothing
    r2 = cli(*RUN, "--topology", str(testbed.topology), "--out", str(out))
    assert "s1     ready   pipeline kept; 0 inserted, 0 modified, 0 deleted" in r2.stdout
    s = cli("show", "switches", "--out", str(out))
    assert s.returncode == 0, s.stderr
    lines = s.stdout.splitlines()
    assert lines[0].startswith("# dumbbell-4: state of pid") and lines[0].endswith("(controller stopped)")
    assert lines[1].split() == ["switch", "address", "dev", "state", "primary", "syncs", "last", "sync", "/",
                                "error"]
    assert lines[2].split()[:6] == ["s1", testbed.addresses["s1"], "1", "ready", "yes", "1"]
    for view in ("flows", "hops"):
        v = cli("show", view, "--out", str(out))
        assert v.returncode == 0 and f"(no {view} yet)" in v.stdout
    losses = cli("show", "losses", "--out", str(out))
    assert [ln.split() for ln in losses.stdout.splitlines()[2:]] == [
        ["s1:5->s2:2", "fabric", "0"], ["s2:2->s1:5", "fabric", "0"]]


def test_unreachable_switch_is_named(cli, testbed: SwitchBed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    testbed.stop("s2")
    r = cli(*RUN, "--topology", str(testbed.topology), "--out", str(tmp_path))
    assert r.returncode == 1
    assert (f"s2     FAILED  switch s2: unreachable at {testbed.addresses['s2']} "
            f"(no gRPC connection within 1 s)") in r.stderr
    assert "s1     ready" in r.stdout and "1/2 switches ready" in r.stdout
    s = cli("show", "switches", "--out", str(tmp_path))
    row = next(ln for ln in s.stdout.splitlines() if ln.startswith("s2 "))
    assert "failed" in row and "unreachable" in row


def test_rejected_pipeline_is_named(cli, testbed: SwitchBed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from google.protobuf import text_format

    from controller.p4rt.pipeline import build_p4info_from_source
    other = build_p4info_from_source(ROOT / "p4" / "examples" / "ipv4_forward.p4")
    p4info = tmp_path / "other.p4info.txtpb"
    p4info.write_text(text_format.MessageToString(other))
    r = cli(*RUN, "--topology", str(testbed.topology), "--out", str(tmp_path), "--p4info", str(p4info))
    assert r.returncode == 1
    for sw in ("s1", "s2"):
        assert f"{sw}     FAILED  switch {sw}: pipeline rejected: INVALID_ARGUMENT" in r.stderr


def test_rejected_entry_is_named(cli, testbed: SwitchBed, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prog = tmp_path / "p4"
    shutil.copytree(ROOT / "p4", prog, ignore=shutil.ignore_patterns("examples"))
    ingress = prog / "include" / "ingress.p4"
    text = ingress.read_text()
    start = text.index("table ipv4_lpm")
    i = text.index("size = 1024;", start)
    ingress.write_text(text[:i] + "size = 2;" + text[i + len("size = 1024;"):])
    r = cli(*RUN, "--topology", str(testbed.topology), "--out", str(tmp_path),
            "--program", str(prog / "int_rocev2.p4"))
    assert r.returncode == 1
    # s1 has five host routes for a table of two; the refused ones are named
    assert "s1     FAILED  switch s1: write refused: 3 of 31 update(s) failed" in r.stderr
    assert re.search(r"update #\d+ INSERT SwitchIngress\.ipv4_lpm dst_addr=10\.0\.\d\.\d/32 -> "
                     r"SwitchIngress\.ipv4_forward\(port=\d, src_mac=02:00:00:00:00:01, dst_mac=[0-9a-f:]+\): "
                     r"RESOURCE_EXHAUSTED", r.stderr)


def test_bad_inputs_exit_2_with_the_reason(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nswitchs: []\n")
    r = cli(*RUN, "--topology", str(bad), "--out", str(tmp_path))
    assert r.returncode == 2 and f"controller: topology {bad}:" in r.stderr and "switchs" in r.stderr
    r = cli(*RUN, "--topology", str(tmp_path / "missing.yaml"), "--out", str(tmp_path))
    assert r.returncode == 2 and "missing.yaml" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--agent", "h1-no-port")
    assert r.returncode == 2 and "expected HOST=ADDR:PORT" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--out", str(tmp_path), "--agent",
            "h9=127.0.0.1:1")
    assert r.returncode == 2 and "--agent h9=...: no host 'h9' in topology" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--sink-mode", "report")
    assert r.returncode == 2 and "--sink-mode report needs --collector-host" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--collector-ip", "10.0.9.1")
    assert r.returncode == 2 and "needs --collector-ip, --collector-mac and --collector-at" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--collector-at", "s1")
    assert r.returncode == 2 and "expected SWITCH:PORT" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--collector-at", "s1:511")
    assert r.returncode == 2 and "port 511 is outside 0..510" in r.stderr   # v1model's drop port
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--sink-mode", "report",
            "--collector-host", "h5")     # RUN has --report-port 0
    assert r.returncode == 2 and "needs a fixed --report-port" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--out", str(tmp_path),
            "--int-instructions", "0x0200")
    assert r.returncode == 2 and "asks for fields p4/int_rocev2.p4 does not supply" in r.stderr
    r = cli("show", "flows", "--out", str(tmp_path / "nothing"))
    assert r.returncode == 1 and "not found; is `python -m controller run --out" in r.stderr


def test_entries_dry_run(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("entries", "--topology", str(TOPOFILES / "leaf_spine.yaml"), "--switch", "s1")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == "# s1: 13 entries, 0 clone session(s)"
    assert "SwitchEgress.fabric_port egress_port=1 -> SwitchEgress.set_fabric()" in r.stdout
    r = cli("entries", "--topology", str(TOPOFILES / "leaf_spine.yaml"), "--switch", "s9")
    assert r.returncode == 2 and "switch 's9' not in the topology" in r.stderr


def test_standby_collectors_on_the_command_line(cli) -> None:  # type: ignore[no-untyped-def]
    """--standby-collector: a topology host (its UDP port or --report-port's) or an
    address outside the topology; each gets a replica of the report clone session."""
    r = cli("entries", "--topology", str(TOPOFILES / "leaf_spine.yaml"), "--switch", "s4",
            "--sink-mode", "report", "--collector-host", "h4", "--standby-collector", "h1:40000",
            "--standby-collector", "ip=10.0.9.2,mac=02:AA:00:00:00:02,at=s1:7")
    assert r.returncode == 0, r.stderr
    assert ("SwitchEgress.report_collector egress_rid=2 -> SwitchEgress.set_report_collector("
            "collector_mac=02:00:00:00:00:02, collector_ip=10.0.1.1, collector_port=40000)") in r.stdout
    assert "egress_rid=3 -> SwitchEgress.set_report_collector(collector_mac=02:00:00:00:00:01, " \
           "collector_ip=10.0.9.2, collector_port=32766)" in r.stdout
    assert "clone session 500 -> ports [2, 4, 3]" in r.stdout
    for bad, why in (("h1:x", "UDP port 'x' is not a number"), ("h1:0", "UDP port 0 outside 1..65535"),
                     ("ip=10.0.9.2,mac=02:aa:00:00:00:02", "needs ip=, mac= and at="),
                     ("ip=10.0.9.300,mac=02:aa:00:00:00:02,at=s1:7", "is not an IPv4 address"),
                     ("ip=10.0.9.2,mac=02:aa,at=s1:7", "is not a MAC address"),
                     ("ip=10.0.9.2,mac=02:aa:00:00:00:02,at=s1", "expected SWITCH:PORT"),
                     ("host=h1,at=s1:7", "give a topology host, or ip, mac and at"),
                     ("ip=1.2.3.4,color=red", "bad or repeated 'color=red'")):
        r = cli("entries", "--topology", str(TOPOFILES / "leaf_spine.yaml"), "--sink-mode", "report",
                "--collector-host", "h4", "--standby-collector", bad)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, (bad, r.stderr)
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--standby-collector", "h1")
    assert r.returncode == 2 and "--standby-collector needs --sink-mode report" in r.stderr
    r = cli(*RUN, "--topology", str(TOPOFILES / "dumbbell.yaml"), "--standby-collector", "h1:x")
    assert r.returncode == 2 and "UDP port 'x' is not a number" in r.stderr


GOLDEN = Path(__file__).resolve().parent / "golden"


def test_entries_golden(cli) -> None:  # type: ignore[no-untyped-def]
    """The full entry list of one switch, as printed (regenerate the file on purpose only)."""
    r = cli("entries", "--topology", str(TOPOFILES / "dumbbell.yaml"), "--switch", "s2",
            "--sink-mode", "report", "--collector-host", "h5")
    assert r.returncode == 0, r.stderr
    assert r.stdout == (GOLDEN / "entries_dumbbell_s2_report.txt").read_text()


def test_running_controller_shown_then_stopped_by_sigterm(testbed: SwitchBed, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys
    import time

    from tests.helpers.waiting import wait_for
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "controller", "run", "--topology", str(testbed.topology),
                             "--out", str(out), "--report-port", "0", "--agent-port", "0", "--interval", "0.2",
                             "--status-every", "0.3"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        state = out / "controller_state.json"
        assert wait_for(lambda: state.exists(), timeout_s=30)
        time.sleep(0.5)
        show = subprocess.run([sys.executable, "-m", "controller", "show", "switches", "--out", str(out)],
                              cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
        assert show.returncode == 0 and "(controller stopped)" not in show.stdout
        assert [ln.split()[3] for ln in show.stdout.splitlines()[2:]] == ["ready", "ready"]
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == 0, stderr
        assert "2/2 switches ready" in stdout
        assert re.search(r"\d\d:\d\d:\d\d switches 2/2 reports 0 host-records 0 flows 0 feedback 0 link-lost 0",
                         stdout), stdout
        from controller.runner import read_state
        assert read_state(state)["running"] is False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
