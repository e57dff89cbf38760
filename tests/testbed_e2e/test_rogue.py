"""A keyless rogue host during a workload on the P4 test bed, with mutual TLS to the
switches: every forged feedback record, host-record batch and Telemetry Report is
refused and counted by reason, none applied, the workload finishes and the
controller's and agents' memory stays flat."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.bpf, pytest.mark.slow]


def test_rogue_floods_are_refused_and_nothing_forged_is_applied(tmp_path):
    spec = {"name": "rogue-e2e", "topology": "dumbbell", "switch": "softswitch", "cc": "hpcc",
            "recovery": "sr", "duration_s": 60, "sample_interval_s": 0.5, "seed": 3,
            "workload": {"kind": "p2p", "hosts": ["h1", "h5"], "size": "64K", "count": 40,
                         "rate": "4M"},
            "rogue": {"rate": 1000, "duration_s": 4, "start_s": 0.5}}
    p = tmp_path / "spec.yaml"
    p.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "mininet_topos", "experiment", str(p), "--out",
                        str(out), "--mtls"], cwd=ROOT, capture_output=True, text=True,
                       timeout=400, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    s = json.loads((out / "summary.json").read_text())
    assert s["all_finished"] and not s["timed_out"]
    rogue = s["rogue"]
    assert rogue["applied"] == {"feedback": 0, "host_records": 0, "reports": 0}
    sent = rogue["sent"]
    assert min(sent.values()) >= 3000
    # every forged feedback datagram reached an agent and was refused there, by its kernel
    # socket filter or by the MAC check after it ("received" counts only the latter)
    assert rogue["rejected"]["feedback"] == sent["feedback"]
    drops = rogue["telemetry"]["socket_drops"] or 0
    assert rogue["rejected"]["host_records"] + drops >= sent["host_records"]
    assert rogue["rejected"]["reports"] + drops >= sent["reports"]
    assert set(rogue["rejected"]["by_reason"]) <= {
        "feedback_unauthenticated", "feedback_bad_mac", "report_source",
        "host_records_unauthenticated", "host_records_bad_mac"}
    assert max(rogue["rss_growth_mib"].values()) < 30
    mem = rogue["memory"]   # sampled through the run: start / peak / end per process
    assert "controller" in mem and any(n.startswith("agent-") for n in mem)
    assert all(m["samples"] >= 3 and m["peak_mib"] >= m["start_mib"] for m in mem.values())
    assert rogue["memory_flat"], mem
    assert "rogue: feedback sent" in r.stdout
