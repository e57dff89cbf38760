"""The rogue experiment's parts without Mininet: the flooder against a keyed collector
and a keyed feedback receiver on loopback (nothing applied, everything counted), its
refusal to flood beyond the test bed, the spec field and the summary arithmetic."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.auth import KeyFile, KeyRing, Verifier
from controller.int import Collector, CollectorConfig
from formats.auth import CONTROLLER_SENDER_ID, FrameKind
from mininet_topos.experiment.rogue_run import finish_rogue, format_rogue, rogue_comparison
from mininet_topos.experiment.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
KEYS = KeyFile.from_ring(KeyRing(keys={1: b"d" * 32}, sign_key_id=1))


def _rogue(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mininet_topos.experiment.rogue", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)


def test_flood_is_refused_and_counted(tmp_path: Path) -> None:
    fb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fb.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    fb.bind(("127.0.0.1", 0))
    fb.setblocking(False)
    agent = Verifier(KEYS, kinds=(FrameKind.FEEDBACK,), only_senders=frozenset({CONTROLLER_SENDER_ID}))
    with Collector(CollectorConfig(report_port=0, agent_port=0, keys=KEYS,
                                   report_sources=frozenset({("10.255.0.1", 32766)}))) as c:
        r = _rogue("--rate", "500", "--duration", "1", "--qp",
                   f"127.0.0.1:{fb.getsockname()[1]}=0x100,0x101", "--agent-id", "10.0.1.1",
                   "--collector", f"127.0.0.1:{c.agent_address[1]}",
                   "--reports", f"127.0.0.1:{c.report_address[1]}", "--out", str(tmp_path / "r.json"))
        assert r.returncode == 0, r.stderr
        sent = json.loads((tmp_path / "r.json").read_text())
        assert sent["sent"] == {"feedback": 500, "host_records": 500, "reports": 500}
        end = time.monotonic() + 5
        while sum(c.stats().rejected.values()) < 1000 and time.monotonic() < end:
            time.sleep(0.05)
        st = c.stats()
    got = 0
    while True:
        try:
            data = fb.recv(65535)
        except BlockingIOError:
            break
        got += 1
        assert agent.open(data) is None
    assert got == 500 and agent.stats.accepted == 0
    assert agent.stats.rejected == {"unauthenticated": 250, "bad_mac": 250}
    assert st.host_records == 0 and st.reports == 0 and st.agent_datagrams == 0
    assert st.rejected == {"report_source": 500, "agent_unauthenticated": 250,
                           "agent_bad_mac": 250}
    r = _rogue("--duration", "1", "--reports", "192.0.2.1:32766", "--out", str(tmp_path / "x"))
    assert r.returncode == 2 and "only floods the test bed" in r.stderr


def test_rogue_preset_and_summary(tmp_path: Path) -> None:
    specs = load_spec(ROOT / "mininet_topos" / "presets" / "rogue.yaml")
    assert [s.rogue.rate if s.rogue else None for s in specs] == [0, 5000]
    out = {"sent": {"feedback": 10, "host_records": 10, "reports": 10},
           "applied": {"feedback": 0, "host_records": 0, "reports": 0},
           "rejected": {"controller": {"report_source": 10, "agent_bad_mac": 4,
                                       "agent_unauthenticated": 6}},
           "rss_growth_mib": {"controller": 0.5}}
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "agent-h1.log").write_text('12:00:00 rec 1\nebpf.agent: final {"feedback_datagrams"'
                                       ': 10, "auth_rejected": {"bad_mac": 5, '
                                       '"unauthenticated": 5}}\n')
    r = finish_rogue(out, logs)
    assert r["rejected"]["feedback"] == 10 and r["rejected"]["host_records"] == 10
    assert r["rejected"]["reports"] == 10 and r["received"] == {"feedback": 10}
    both = rogue_comparison([(specs[0], {"goodput_tx_bps_total": 8e6}),
                             (specs[1], {"goodput_tx_bps_total": 7e6, "rogue": r})])
    assert both is not None and both["goodput_ratio"] == pytest.approx(7 / 8)
    assert set(both) >= {"sent", "rejected", "applied", "goodput_ratio"}
    assert "goodput 88 %" in format_rogue(both)
