"""The demo on BMv2, as a user runs it: ``python -m mininet_topos demo --switch bmv2``
(two datacenters, eight switches, 1 % bursty loss on the WAN link s1:3-s5:3, a ring
all-reduce with HPCC and FEC from the loss map; about a minute of traffic).  p4c
compiles the program once (cached), every switch is a ``simple_switch_grpc`` the
controller programs over P4Runtime, and the summary must name the lossy link, list
the INT switches and paths, and the FEC settings sent."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bmv2_helpers import ROOT, require_tools

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.mininet, pytest.mark.slow]

LOSSY = "s1:3-s5:3"


def test_demo_on_bmv2_names_the_lossy_link(tmp_path: Path) -> None:
    require_tools()
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "mininet_topos", "demo", "--switch", "bmv2", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = r.stdout[r.stdout.index("== demo summary =="):]
    assert f"the loss map names the lossy WAN link {LOSSY}" in summary, summary
    # the demo's defaults: HPCC per ACK in the senders, FEC from the test bed's policy
    assert "INT: hop records from" in summary and "FEC policy:" in summary, summary
    assert "data check: passed on all 4 ranks" in summary, summary
    s = json.loads((out / "summary.json").read_text())
    assert s["all_finished"] and not s["timed_out"], s.get("ranks")
    assert s["lossy_link"]["link"] == LOSSY and s["lossy_link"]["loss_rate"] > 0
    intel = s["int"]
    assert {"s1", "s5"} <= set(intel["switches_reporting"]), intel["switches_reporting"]
    assert any({"s1", "s5"} <= set(f["path"]) for f in intel["flows"]), intel["flows"]
