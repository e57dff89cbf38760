"""`experiment faults --rescore`: a finished run's trials, diagnosed again from what each
trial folder saved (no network: synthetic trials written in the harness's layout)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.diagnose.synth import SynthFault, synth_ring, write_run
from mininet_topos.faults.harness import rescore
from mininet_topos.faults.spec import FaultError, FaultSpec

TOPO_FILE = Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles" / "two_dc.yaml"
T0 = 1.7e9


def _run(tmp_path: Path, *, right_before: bool) -> Path:
    """A run folder of two trials: a gray loss and a fault-free one; ``right_before``
    says what the run's own diagnosis said of the first (its summary, not recomputed)."""
    from controller.topology.load import load_topology
    topo = load_topology(TOPO_FILE)
    ranks = ["h1", "h3", "h5", "h7"]
    seed = next(s for s in range(1, 60) if any(
        "s1:3->s5:3" in f.path for f in synth_ring(topo, ranks, None, seed=s).telemetry.flows))
    fault = FaultSpec(kind="gray_loss", target="s1:3->s5:3", onset_s=0.6, duration_s=3600,
                      loss=0.05)
    per_trial = []
    for i, (f, synth) in enumerate([
            (fault, SynthFault(kind="gray_loss", target="s1:3->s5:3", onset=0.6, loss=0.05)),
            (None, None)]):
        ev = synth_ring(topo, ranks, synth, seed=seed)
        tdir = write_run(ev, tmp_path / f"trial{i:03d}", TOPO_FILE)
        truth = f.truth(T0) if f else None
        (tdir / "ground_truth.json").write_text(json.dumps(truth))
        per_trial.append({"trial": i, "fault": truth, "diagnosis": {"at": ev.end_time},
                          "correct_top1": right_before if f else True})
    (tmp_path / "summary.json").write_text(json.dumps(
        {"per_trial": per_trial, "testbed": {"topology": "two-dc"}}))
    return tmp_path


def test_rescore_diagnoses_the_saved_trials_again(tmp_path: Path) -> None:
    said: list[str] = []
    s = rescore(_run(tmp_path, right_before=False), log=said.append)
    assert s["top1_accuracy"] == 1.0 and s["false_alarms"] == 0
    assert s["by_kind"] == {"gray_loss": {"trials": 1, "top1": 1, "top3": 1}}
    assert any(line.startswith("trial   0: MISS -> ok (link s1:3->s5:3 gray_loss)")
               for line in said), said
    assert json.loads((tmp_path / "rescored.json").read_text())["top1_accuracy"] == 1.0


def test_rescore_says_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="summary.json"):
        rescore(tmp_path)
    run = _run(tmp_path, right_before=True)
    for p in (run / "trial001" / "csv").iterdir():
        p.unlink()
    (run / "trial001" / "csv").rmdir()
    with pytest.raises(FaultError, match="trial001: no saved telemetry"):
        rescore(run)
