"""The demo over mutual TLS, as a user runs it: ``python -m mininet_topos demo --mtls``
(here on the kernel switch kind, whose P4Runtime server takes the same TLS options as
the Python target's, so the whole demo runs in about a minute).  Every switch's
P4Runtime endpoint in the controller's topology carries the run's CA, certificate and
key; the controller programs them all and the demo's findings are those of the demo
without TLS (the lossy WAN link named, INT from the switches, FEC settings sent)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


pytestmark = [pytest.mark.root, pytest.mark.mininet, pytest.mark.bpf, pytest.mark.slow]


def test_demo_over_mutual_tls(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    r = subprocess.run([sys.executable, "-m", "mininet_topos", "demo", "--switch", "ebpf",
                        "--mtls", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = r.stdout[r.stdout.index("== demo summary =="):]
    assert "the loss map names the lossy WAN link s1:3-s5:3" in summary, summary
    assert "FEC policy:" in summary and "data check: passed on all 4 ranks" in summary, summary
    topo = yaml.safe_load((out / "logs" / "topology.yaml").read_text())
    switches = topo["switches"]
    assert len(switches) == 8
    for sw in (switches.values() if isinstance(switches, dict) else switches):
        tls = sw.get("tls") or {}
        assert tls.get("ca") and tls.get("cert") and tls.get("key"), sw
    s = json.loads((out / "summary.json").read_text())
    assert s["all_finished"] and not s["timed_out"], s.get("ranks")
