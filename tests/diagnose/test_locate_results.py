"""`controller diagnose --out DIR` finds the files of each results-folder layout."""
from __future__ import annotations

from pathlib import Path

from controller.cli.diagnose import locate


def test_layouts(tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"                     # controller run --out DIR
    ctl.mkdir()
    assert locate(ctl) == (ctl, ctl / "topology.yaml", ctl / "collectives")
    demo = tmp_path / "demo"                   # the demo's or an experiment's results
    (demo / "logs" / "controller").mkdir(parents=True)
    (demo / "logs" / "topology.yaml").write_text("name: x\n")
    assert locate(demo) == (demo / "logs" / "controller", demo / "logs" / "topology.yaml",
                            demo / "collectives")
    faults = tmp_path / "fault"                # experiment faults --out DIR
    (faults / "testbed").mkdir(parents=True)
    (faults / "testbed" / "topology.yaml").write_text("name: x\n")
    (faults / "trial000" / "collectives").mkdir(parents=True)
    tel, _, why = locate(faults)
    assert tel is None and f"--out {faults / 'trial000'}" in str(why)
    trial = faults / "trial000"
    assert locate(trial) == (trial, faults / "testbed" / "topology.yaml",
                             trial / "collectives")
