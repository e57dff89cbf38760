"""`--ecn` reaches every switch's desired entries through the runner's intent, and
`--ecn off` leaves ECN marking unprogrammed (no switch needed: load() only computes)."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.intent import EcnProfile
from controller.intent.compute import T_ECN
from controller.runner import Controller, RunConfig
from controller.runner.config import parse_ecn
from controller.runner.errors import RunError

TOPO = Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles" / "dumbbell.yaml"


def _ecn_entries(ecn: EcnProfile | None, tmp_path: Path) -> list:
    ctl = Controller(cfg=RunConfig(topology=str(TOPO), out_dir=str(tmp_path), ecn=ecn))
    ctl.load()
    return [e for sw in ctl.fleet.switches.values() for e in sw.desired.entries
            if e.table == T_ECN and not e.is_default]


def test_ecn_profile_is_programmed_on_every_port(tmp_path: Path) -> None:
    ecn = parse_ecn("2000:20000:0.1")
    assert ecn == EcnProfile(kmin_bytes=2000, kmax_bytes=20000, pmax=6554)
    entries = _ecn_entries(ecn, tmp_path)
    assert entries
    assert all(dict(e.params) == {"kmin_bytes": 2000, "kmax_bytes": 20000, "pmax": 6554}
               for e in entries)


def test_ecn_off_programs_no_thresholds(tmp_path: Path) -> None:
    assert parse_ecn("off") is None
    assert _ecn_entries(None, tmp_path) == []


@pytest.mark.parametrize("text", ["1:2", "5:1:0.1", "1:2:1.5", "a:b:c"])
def test_bad_ecn_is_a_clear_error(text: str) -> None:
    with pytest.raises(RunError, match="--ecn"):
        parse_ecn(text)
