"""The controller's mitigation against real P4Runtime servers (the leaf-spine topology,
one in-process softswitch per switch): a dead fabric link named -> every affected
route rewritten off it over P4Runtime, read back from the switches; the fault cleared
-> the routes restored; advise writes nothing; every action in the state file and the
export."""
from __future__ import annotations

import csv
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_app_helpers import SwitchBed, make_testbed

from controller.mitigate import Finding
from controller.p4rt import Phase
from controller.p4rt.entries import format_entry
from controller.runner import Controller, RunConfig, read_state

T_LPM = "SwitchIngress.ipv4_lpm"


@pytest.fixture
def ls_bed(tmp_path: Path) -> Iterator[SwitchBed]:
    tb = make_testbed(tmp_path, "leaf_spine.yaml")
    try:
        yield tb
    finally:
        tb.close()


def _routes(ctl: Controller, name: str) -> dict[str, int]:
    """What the switch holds (read over P4Runtime): destination prefix -> egress port."""
    sw = ctl.fleet.switches[name]
    assert sw.client is not None
    schema = sw.schema
    out = {}
    for te in sw.client.read_table_entries(schema.table(T_LPM).id):
        line = format_entry(schema, te)
        dst = re.search(r"dst_addr=(\S+)", line)
        port = re.search(r"port=(\d+)", line)
        assert dst and port, line
        out[dst.group(1)] = int(port.group(1))
    return out


def _ctl(bed: SwitchBed, out: Path, mode: str) -> Controller:
    return Controller(cfg=RunConfig(topology=str(bed.topology), out_dir=str(out), report_port=0, agent_port=0,
                                    status_interval_s=30, connect_timeout_s=2.0, mitigate=mode,
                                    mitigate_hold_down_s=5.0)).start()


DEAD = [Finding(kind="link_down", type="link", component="s3:3->s1:1", confidence=0.9, onset=99.0,
                source="diagnosis", evidence={"silent_s": 2.0})]


def test_a_dead_link_is_routed_around_and_back(ls_bed: SwitchBed, tmp_path: Path) -> None:
    ctl = _ctl(ls_bed, tmp_path, "act")
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values())
        before = {s: _routes(ctl, s) for s in ("s1", "s3", "s4")}
        # ECMP: s3 sends h3 and h4 one over each spine (ports 3 and 4)
        assert sorted(v for k, v in before["s3"].items() if k.startswith("10.0.2.")) == [3, 4]
        assert ctl.mitigator is not None
        [a] = ctl.mitigator.step(DEAD, now=100.0)
        assert (a.verb, a.target, a.outcome) == ("reroute", "s1:1-s3:3", "written")
        after = {s: _routes(ctl, s) for s in ("s1", "s3", "s4")}
        # s3 sends everything for leaf s4 over s2; s4 reaches s3's hosts over s2 too
        assert {k: v for k, v in after["s3"].items() if k.startswith("10.0.2.")} == \
            {"10.0.2.1/32": 4, "10.0.2.2/32": 4}
        assert {k: v for k, v in after["s4"].items() if k.startswith("10.0.1.")} == \
            {"10.0.1.1/32": 4, "10.0.1.2/32": 4}
        # the spine s1 goes around through s4 (and s2) instead of its own dead port 1
        assert all(v == 2 for k, v in after["s1"].items() if k.startswith("10.0.1."))
        # nothing else changed: the same destinations everywhere
        assert {s: set(r) for s, r in after.items()} == {s: set(r) for s, r in before.items()}
        ctl.write_state()
        st = read_state(ctl.cfg.state_file)["mitigation"]
        assert st["mode"] == "act" and st["avoided"] == ["s1:1-s3:3"]
        assert st["actions"][0]["reason"] and st["actions"][0]["evidence"] == {"silent_s": 2.0}
        # not named, but no evidence it healed (nothing crosses it): kept off; shown
        # carrying traffic with no loss for the hold time: the routes are as they were
        assert ctl.mitigator.step([], now=103.0) == []
        assert ctl.mitigator.step([], now=111.0) == []
        [u] = ctl.mitigator.step([], now=111.5, healthy={"s1:1-s3:3": 10.0})
        assert (u.verb, u.undoes, u.outcome) == ("undo", a.seq, "written")
        assert {s: _routes(ctl, s) for s in ("s1", "s3", "s4")} == before
        ctl.tick()   # hands the actions to the export
    finally:
        ctl.stop()
    rows = list(csv.DictReader((tmp_path / "csv" / "mitigation.csv").open()))
    assert [(r["verb"], r["target"], r["outcome"]) for r in rows] == [
        ("reroute", "s1:1-s3:3", "written"), ("undo", "s1:1-s3:3", "written")]
    assert float(rows[0]["onset_to_action_s"]) == pytest.approx(1.0)


def test_advise_writes_nothing(ls_bed: SwitchBed, tmp_path: Path) -> None:
    ctl = _ctl(ls_bed, tmp_path, "advise")
    try:
        before = {s: _routes(ctl, s) for s in ctl.fleet.switches}
        assert ctl.mitigator is not None
        [a] = ctl.mitigator.step(DEAD, now=100.0)
        assert (a.verb, a.outcome) == ("reroute", "advised")
        assert {s: _routes(ctl, s) for s in ctl.fleet.switches} == before
        ctl.write_state()
        assert read_state(ctl.cfg.state_file)["mitigation"]["actions"][0]["outcome"] == "advised"
    finally:
        ctl.stop()


def test_mitigation_off_is_absent_from_the_state(ls_bed: SwitchBed, tmp_path: Path) -> None:
    ctl = _ctl(ls_bed, tmp_path, "off")
    try:
        assert ctl.mitigator is None
        ctl.write_state()
        assert read_state(ctl.cfg.state_file)["mitigation"] is None
    finally:
        ctl.stop()
