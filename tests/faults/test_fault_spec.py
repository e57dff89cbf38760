"""Fault specs: every kind parses against the two-DC topology, bad ones name what is
wrong, ground truth names the component as the diagnosis does, and host faults turn
into the right rank's options; the harness's scoring counts as documented."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.topology.load import load_topology
from mininet_topos.faults.harness import format_score, score
from mininet_topos.faults.inject import traffic_fault_args
from mininet_topos.faults.spec import FaultError, parse_fault

TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")


@pytest.mark.parametrize(("raw", "ctype", "component"), [
    ({"kind": "gray_loss", "link": "s1:3->s5:3", "loss": 0.01, "model": "bursty"}, "link",
     "s1:3->s5:3"),
    ({"kind": "rate_degraded", "link": "s3:3->s1:1", "factor": 0.1}, "link", "s3:3->s1:1"),
    ({"kind": "link_down", "link": "s2:3->s6:3"}, "link", "s2:3->s6:3"),
    ({"kind": "congestion", "link": "s5:1->s7:3", "rate_mbps": 120}, "link", "s5:1->s7:3"),
    ({"kind": "tiny_queue", "port": "s3:3", "queue_pkts": 2}, "port", "s3:3"),
    ({"kind": "slow_receiver", "host": "h5", "delay_s": 0.2}, "host", "h5"),
    ({"kind": "straggler", "rank": 2, "late_s": 0.3}, "rank", "2"),
])
def test_every_kind_parses_and_names_its_component(raw: dict, ctype: str, component: str
                                                   ) -> None:
    f = parse_fault({**raw, "onset_s": 3, "duration_s": 10}, TOPO, nranks=4)
    t = f.truth(1000.0)
    assert (t["type"], t["component"], t["onset_unix"], t["end_unix"]) == (
        ctype, component, 1003.0, 1013.0)
    assert f.matches(ctype, component)
    assert not f.matches("host" if ctype != "host" else "link", component)


def test_link_down_matches_either_direction_other_kinds_one() -> None:
    down = parse_fault({"kind": "link_down", "link": "s1:3->s5:3"}, TOPO)
    loss = parse_fault({"kind": "gray_loss", "link": "s1:3->s5:3"}, TOPO)
    assert down.matches("link", "s5:3->s1:3") and not loss.matches("link", "s5:3->s1:3")


@pytest.mark.parametrize(("raw", "msg"), [
    ({"kind": "melted"}, "kind 'melted' not one of"),
    ({"kind": "gray_loss", "link": "s1:3-s5:3"}, "no link direction 's1:3-s5:3'"),
    ({"kind": "gray_loss", "link": "s1:3->s5:3", "loss": 0.2}, "loss=0.2 must be a number"),
    ({"kind": "rate_degraded", "link": "h1:0->s3:1"}, "must leave a switch port"),
    ({"kind": "tiny_queue", "port": "s3:9"}, "switch s3 has no port 9"),
    ({"kind": "slow_receiver", "host": "h9"}, "no host 'h9'"),
    ({"kind": "straggler", "rank": 4}, "rank 4 is not a rank"),
    ({"kind": "straggler", "rank": 1, "when": 3}, "unknown field(s) ['when']"),
    ({"kind": "gray_loss", "link": "s1:3->s5:3", "model": "wavy"}, "model 'wavy'"),
])
def test_bad_faults_say_what_is_wrong(raw: dict, msg: str) -> None:
    with pytest.raises(FaultError, match=None) as exc:
        parse_fault(raw, TOPO, nranks=4)
    assert msg in str(exc.value)


def test_host_faults_become_the_right_ranks_options() -> None:
    hosts = ["h1", "h3", "h5", "h7"]
    slow = parse_fault({"kind": "slow_receiver", "host": "h5", "onset_s": 2,
                        "duration_s": 5, "delay_s": 0.2}, TOPO)
    assert traffic_fault_args(slow, 2, hosts, 100.0) == ["--fault-slow-rx", "102.000:5:0.2"]
    assert traffic_fault_args(slow, 1, hosts, 100.0) == []
    strag = parse_fault({"kind": "straggler", "rank": 3, "onset_s": 1, "duration_s": 9},
                        TOPO, nranks=4)
    assert traffic_fault_args(strag, 3, hosts, 100.0) == ["--fault-straggle", "101.000:9:0.3"]
    assert traffic_fault_args(None, 0, hosts, 100.0) == []


def test_score_counts_accuracy_false_alarms_and_median_time() -> None:
    def trial(kind: str | None, t1: bool, t3: bool, tl: float | None = None,
              fa: bool = False) -> dict:
        return {"fault": {"kind": kind} if kind else None, "correct_top1": t1,
                "correct_top3": t3, "false_alarm": fa, "time_to_localise_s": tl}
    s = score([trial("gray_loss", True, True, 1.0), trial("gray_loss", False, True),
               trial("straggler", True, True, 3.0), trial("straggler", True, True, 2.0),
               trial(None, True, True), trial(None, False, False, fa=True)])
    assert s["trials"] == 6 and s["false_alarms"] == 1 and s["fault_free_trials"] == 2
    assert s["top1_accuracy"] == 0.75 and s["top3_accuracy"] == 1.0
    assert s["median_time_to_localise_s"] == 2.0
    assert s["by_kind"]["gray_loss"] == {"trials": 2, "top1": 1, "top3": 2}
    assert any("false alarms: 1 of 2" in line for line in format_score(s))


def test_experiment_specs_carry_faults_checked_against_the_topology() -> None:
    from mininet_topos.experiment import SpecError, apply_overrides, load_spec
    from mininet_topos.experiment.spec import spec_from_dict

    root = Path(__file__).resolve().parents[2]
    (spec,) = load_spec(root / "mininet_topos" / "presets" / "faults_demo.yaml")
    apply_overrides(TOPO, spec)
    assert [f["kind"] for f in spec.faults] == ["gray_loss", "straggler"]
    base = {"name": "x", "topology": "two-dc", "switch": "linux-router",
            "workload": {"kind": "allreduce", "hosts": ["h1", "h3", "h5", "h7"]}}
    with pytest.raises(SpecError, match="faults: expected a list"):
        spec_from_dict({**base, "faults": {"kind": "straggler"}})
    bad = spec_from_dict({**base, "faults": [{"kind": "straggler", "rank": 7}]})
    with pytest.raises(SpecError, match=r"faults\[0\]: fault straggler: rank 7"):
        apply_overrides(TOPO, bad)
    p4 = spec_from_dict({**base, "switch": "softswitch",
                         "faults": [{"kind": "rate_degraded", "link": "s1:3->s5:3"}]})
    with pytest.raises(SpecError, match="kernel routers only"):
        apply_overrides(TOPO, p4)
