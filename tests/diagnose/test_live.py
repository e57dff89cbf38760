"""Live diagnosis: the thread the controller runs re-reads a run directory (collective
logs + the controller's telemetry exports) and publishes the ranked culprits."""
from __future__ import annotations

import json
import time
from pathlib import Path

from controller.diagnose.live import LiveDiagnosis
from controller.diagnose.synth import SynthFault, synth_ring, write_run
from controller.topology.load import load_topology
from tests.helpers.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TOPO_FILE = ROOT / "mininet_topos" / "topofiles" / "two_dc.yaml"
TOPO = load_topology(TOPO_FILE)
RANKS = ["h1", "h3", "h5", "h7"]


def test_thread_names_the_culprit_and_writes_it(tmp_path: Path) -> None:
    fault = SynthFault(kind="tiny_queue", target="s1:3", onset=0.6)
    length = synth_ring(TOPO, RANKS, fault, seed=1).end_time - 1.7e9
    ev = synth_ring(TOPO, RANKS, fault, seed=1, t0=time.time() - length)  # ends now: live
    out = write_run(ev, tmp_path / "run", TOPO_FILE)
    changes = []
    live = LiveDiagnosis(topo=TOPO, out_dir=out, logs=[out / "collectives"], every_s=0.1,
                         on_change=changes.append).start()
    try:
        assert wait_for(lambda: live.latest is not None and live.rounds >= 3, timeout_s=60)
    finally:
        live.stop()
    snap = live.snapshot()
    assert snap is not None and snap["fault"] and snap["errors"] == {}
    top = snap["culprits"][0]
    assert (top["type"], top["component"], top["kind"]) == ("port", "s1:3", "tiny_queue")
    assert len(changes) == 1      # the same verdict every round: reported once
    on_disk = json.loads((out / "summary.json").read_text())["diagnosis"]
    assert on_disk["culprits"][0]["component"] == "s1:3"


def test_nothing_to_read_yet_leaves_no_verdict(tmp_path: Path) -> None:
    live = LiveDiagnosis(topo=TOPO, out_dir=tmp_path, logs=[tmp_path / "collectives"])
    assert live.step() is None and live.latest is None and live.snapshot() is None
    (tmp_path / "collectives").mkdir()
    (tmp_path / "collectives" / "rank0.jsonl").write_text('{"half a line')
    assert live.step() is None and live.latest is None
    assert not (tmp_path / "summary.json").exists()
