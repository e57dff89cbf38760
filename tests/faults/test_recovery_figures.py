"""The recovery experiment's figures from a trial's records and the controller's action
log: steps, completion (None when the job hung), the pace coming back, the first action
on the faulty link, INT paths after the reroute, the per-kind summary and the preset."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mininet_topos.faults import recovery as rec
from mininet_topos.faults.recovery_run import (
    culprit_named,
    is_mitigation_spec,
    load_recovery_spec,
    pick_targets,
)
from mininet_topos.faults.spec import FaultError
from traffic.collog.records import CollRecord

PRESET = Path(__file__).resolve().parents[2] / "mininet_topos" / "presets" / "recovery_faults.yaml"


def ring(durations: list[float], *, t0: float = 100.0, ranks: int = 2,
         unfinished: int | None = None) -> list[CollRecord]:
    """Send records of consecutive steps taking ``durations`` (every rank alike); the
    step ``unfinished`` never ends."""
    out, t = [], t0
    for i, d in enumerate(durations):
        for r in range(ranks):
            out.append(CollRecord(rank=r, comm="c", op="allreduce", seq=i // 6, step=i % 6,
                                  dir="send", start=t, end=None if i == unfinished else t + d))
            out.append(CollRecord(rank=r, comm="c", op="allreduce", seq=i // 6, step=i % 6,
                                  dir="recv", start=t, end=t + d))
        t += d
    return out


def test_steps_group_the_ranks_sends_and_skip_unfinished_ones() -> None:
    st = rec.steps(ring([0.1, 0.2, 0.3], unfinished=1))
    assert [(s.seq, s.step) for s in st] == [(0, 0), (0, 2)]
    assert st[1].duration == pytest.approx(0.3)


@pytest.mark.parametrize(("records", "expect", "done"), [
    (ring([0.1] * 6), None, 0.6),
    (ring([0.1] * 6), 12, 0.6),          # as many sends as the warm-up
    (ring([0.1] * 5), 12, None),         # fewer: cut off
    (ring([0.1] * 6, unfinished=3), None, None),   # a transfer hung
    ([], None, None),
])
def test_completion_is_none_when_the_job_hung(records: list[CollRecord], expect: int | None,
                                              done: float | None) -> None:
    got = rec.completion_s(records, 100.0, expect_sends=expect)
    assert got == (None if done is None else pytest.approx(done))


@pytest.mark.parametrize(("durations", "onset", "back"), [
    # the pace before the onset is 0.1 s a step
    ([0.1] * 5 + [0.5, 0.5, 0.1, 0.1, 0.1], 100.5, 1.1),   # back once three steps run at 0.1
    ([0.1] * 5 + [0.5, 0.5, 0.12, 0.1, 0.1], 100.5, 1.22),  # 0.12 is outside 10 %, median in
    ([0.1] * 5 + [0.5] * 6, 100.5, None),                   # never
    ([0.1] * 5 + [0.1, 0.1], 100.5, None),                  # too few steps after the onset
    ([0.5] * 6, 100.0, None),                               # nothing before the onset
])
def test_recovered_needs_three_steps_at_the_old_pace(durations: list[float], onset: float,
                                                     back: float | None) -> None:
    got = rec.recovered_after(rec.steps(ring(durations)), onset)
    assert got == (None if back is None else pytest.approx(back))


ACTS: list[dict[str, Any]] = [
    {"verb": "none", "avoid": [], "at": 101.0},
    {"verb": "reroute", "avoid": ["s3:3-s1:1"], "at": 104.0},
    {"verb": "reroute", "avoid": ["s1:3-s5:3"], "at": 103.0},
    {"verb": "undo", "avoid": ["s1:3-s5:3"], "at": 120.0},
    {"verb": "fec", "avoid": ["s1:3-s5:3"], "at": 99.0},     # before the trial
]


@pytest.mark.parametrize(("link", "since", "at"), [
    ("s1:3-s5:3", 100.0, 103.0), ("s3:3-s1:1", 100.0, 104.0), ("s2:3-s6:3", 100.0, None),
    ("s1:3-s5:3", 98.0, 99.0),
])
def test_first_action_is_the_first_that_acts_on_the_link(link: str, since: float,
                                                         at: float | None) -> None:
    a = rec.first_action(ACTS, link, since=since)
    assert (a and a["at"]) == at


def test_int_paths_after_the_reroute_count_the_link() -> None:
    f = [SimpleNamespace(t=t, path=p) for t, p in [
        (1.0, ("h1:0->s3:1", "s3:3->s1:1")), (3.0, ("s3:3->s1:1",)), (3.0, ("s3:4->s2:1",)),
        (4.0, ("s3:4->s2:1",)), (4.0, ())]]
    assert rec.int_paths_after(f, ["s3:3->s1:1", "s1:1->s3:3"], 2.0) == (1, 3)


ROWS = [
    {"fault": "gray_loss", "onset_to_action_s": 2.0, "onset_to_off_s": 2.1,
     "completion_ratio_mitigated": 1.1, "completion_ratio_unmitigated": None},
    {"fault": "gray_loss", "onset_to_action_s": 4.0, "onset_to_off_s": 4.1,
     "completion_ratio_mitigated": 1.2, "completion_ratio_unmitigated": 2.5},
    {"fault": "link_down", "onset_to_action_s": None, "completion_ratio_mitigated": None,
     "completion_ratio_unmitigated": None},
]


def test_the_culprit_is_named_by_the_diagnosis_or_else_by_the_controllers_action() -> None:
    assert culprit_named({"onset_to_culprit_s": 0.5, "onset_to_action_s": 0.7}) == (0.5, "diagnosis")
    # the acting bed took the traffic off before the records showed the fault
    assert culprit_named({"onset_to_culprit_s": None, "onset_to_action_s": 0.7}) == (0.7, "controller")
    assert culprit_named({"onset_to_culprit_s": None, "onset_to_action_s": None}) == (None, None)
    assert culprit_named({}) == (None, None)


def test_summary_takes_medians_per_kind_and_counts_hung_runs() -> None:
    s = rec.summarise(ROWS)
    assert list(s) == ["gray_loss", "link_down"]
    g = s["gray_loss"]
    assert (g["trials"], g["median_onset_to_action_s"]) == (2, 3.0)
    assert g["median_onset_to_off_s"] == pytest.approx(3.1)
    assert g["median_completion_ratio_mitigated"] == pytest.approx(1.15)
    assert (g["hung_mitigated"], g["hung_unmitigated"]) == (0, 1)
    assert s["link_down"]["median_onset_to_action_s"] is None
    lines = rec.format_table(s, actions_fault_free=0, fault_free_trials=10,
                             flap={"target": "s3:3->s1:1", "period_s": 1.5, "flapping_s": 9.0,
                                   "actions": 1, "allowed": 1})
    assert "| gray_loss | 2 | - | 3.00 s | 3.10 s | - | 1.15x | 2.50x (1 hung) |" in lines
    assert "| link_down | 1 | - | - | - | - | - (1 hung) | - (1 hung) |" in lines
    assert lines[-2] == "actions in fault-free runs: 0 in 10"
    assert "1 action(s), the hold-down allows 1" in lines[-1]


def test_the_preset_loads_and_bad_keys_are_named(tmp_path: Path) -> None:
    assert is_mitigation_spec(PRESET)
    cfg = load_recovery_spec(PRESET, tmp_path)
    assert (cfg.switch, cfg.seeds, cfg.kinds, cfg.loss) == ("ebpf", (1, 2, 3),
                                                            ("gray_loss", "link_down", "straggler"), 0.05)
    assert cfg.fault_free >= 10
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: mitigation_faults\nseeds: [1]\nrounds: 3\n")
    with pytest.raises(FaultError, match="unknown keys rounds"):
        load_recovery_spec(bad, tmp_path)
    bad.write_text("kind: mitigation_faults\nkinds: [meteor_strike]\n")
    with pytest.raises(FaultError, match="kinds meteor_strike"):
        load_recovery_spec(bad, tmp_path)
    assert not is_mitigation_spec(tmp_path / "missing.yaml")


def test_the_ranks_qp_shape_reaches_the_harness(tmp_path: Path) -> None:
    """``rate`` and ``qps`` set the ranks' QPs (the window go-back-N resends per loss);
    left out, the experiment's own (one QP at 16 Mbit/s, as the CLI form runs); bad
    values are named."""
    from mininet_topos.faults.recovery_run import _Bed
    from mininet_topos.topologies import resolve_topology
    spec = tmp_path / "shape.yaml"
    spec.write_text("kind: mitigation_faults\nkinds: [gray_loss]\nrate: 8M\nqps: 2\n")
    cfg = load_recovery_spec(spec, tmp_path)
    bed = _Bed(cfg, "act", resolve_topology("two-dc"), None)
    assert (bed.hcfg.rate, bed.hcfg.qps) == ("8M", 2)
    spec.write_text("kind: mitigation_faults\nkinds: [gray_loss]\n")
    plain = _Bed(load_recovery_spec(spec, tmp_path), "act", resolve_topology("two-dc"), None)
    assert (plain.hcfg.rate, plain.hcfg.qps) == ("16M", 1)
    preset = load_recovery_spec(PRESET, tmp_path)
    assert (preset.rate, preset.qps) == ("16M", 1)
    for line, named in (("rate: fast", "rate 'fast'"), ("rate: 0", "rate '0': outside"),
                        ("qps: 0", "qps 0"), ("qps: true", "qps True")):
        spec.write_text(f"kind: mitigation_faults\n{line}\n")
        with pytest.raises(FaultError, match=named):
            load_recovery_spec(spec, tmp_path)


def test_targets_are_leaf_spine_links_for_both_kinds() -> None:
    from mininet_topos.topologies import resolve_topology
    topo = resolve_topology("two-dc")
    places = {"gray_loss": ["s1:3->s5:3"],
              "link_down": ["s1:3->s5:3", "s3:3->s1:1", "s1:1->s3:3", "s7:3->s5:1"]}
    t = pick_targets(topo, places, (1, 2, 3), ("gray_loss", "link_down"))
    fabric = {"s3:3->s1:1", "s1:1->s3:3", "s7:3->s5:1"}
    assert {t[(k, s)] for k in ("gray_loss", "link_down") for s in (1, 2, 3)} <= fabric
    # gray loss goes where a cross-DC pair's data crosses (its QPs have a window in flight)
    cross = {"s1:3->s5:3": ["h3->h5"], "s3:3->s1:1": ["h7->h1"], "s1:1->s3:3": ["h1->h3", "h7->h1"],
             "s7:3->s5:1": ["h5->h7"]}
    cross["s5:3->s1:3"] = ["h7->h1"]
    t = pick_targets(topo, places, (1, 2, 3), ("gray_loss", "link_down"), cross)
    assert {t[("gray_loss", s)] for s in (1, 2, 3)} <= {"s3:3->s1:1", "s1:1->s3:3"}
    with pytest.raises(FaultError, match="no fabric link for link_down"):
        pick_targets(topo, {"gray_loss": ["s1:3->s5:3"], "link_down": ["s1:3->s5:3"]}, (1,),
                     ("link_down",))


class _Dropper:
    def __init__(self) -> None:
        self.loss: list[float] = []

    def set_bernoulli(self, p: float) -> None:
        self.loss.append(p)


class _Inj:
    """The parts of `Injector` the flapper uses: droppers armed, applied, healed."""

    def __init__(self) -> None:
        self._armed = [_Dropper(), _Dropper()]
        self.healed = False

    def arm(self, f: Any) -> None:
        pass

    def prepare(self, f: Any, onset_unix: float) -> None:
        pass

    def apply(self, f: Any) -> None:
        for em in self._armed:
            em.set_bernoulli(1.0)
        self._armed = []

    def heal(self) -> None:
        self.healed = True


def test_a_flapping_link_goes_up_and_down_on_both_ends_until_healed() -> None:
    from mininet_topos.faults.recovery_run import _Flapper
    from tests.helpers.waiting import wait_for

    inj = _Inj()
    ems = list(inj._armed)
    fl = _Flapper(inj, 0.01)   # type: ignore[arg-type]
    fl.arm(None)
    fl.apply(None)
    assert wait_for(lambda: all(len(e.loss) >= 5 for e in ems))
    fl.heal()
    assert inj.healed
    n = [len(e.loss) for e in ems]
    for e in ems:   # down at the onset, then up, down, ...
        assert e.loss[:5] == [1.0, 0.0, 1.0, 0.0, 1.0]
    assert [len(e.loss) for e in ems] == n   # nothing after the heal


def test_cli_checks_the_preset_and_takes_mitigate(capsys: pytest.CaptureFixture[str]) -> None:
    from mininet_topos.cli import main, parser
    assert main(["check", "recovery_faults"]) == 0
    assert "gray_loss, link_down, straggler x seeds 1, 2, 3 on ebpf, 10 fault-free" in capsys.readouterr().out
    a = parser().parse_args(["experiment", "faults", "--mitigate", "act", "--out", "x"])
    assert a.mitigate == "act"
    with pytest.raises(SystemExit):
        parser().parse_args(["experiment", "faults", "--mitigate", "maybe", "--out", "x"])


class _GrayInj(_Inj):
    """The parts of `Injector` the fabric gray loss uses: ends, a dropper at an interface."""

    def __init__(self) -> None:
        super().__init__()
        self.at: list[tuple[str, str]] = []
        self.applied: list[dict[str, Any]] = []
        self.em = _Dropper()

    def _ends(self, link: str) -> tuple[str, int, str, int]:
        from mininet_topos.faults.inject import Injector
        return Injector._ends(self, link)   # type: ignore[arg-type]

    def _netns_of(self, node: str) -> str:
        return f"ns-{node}"

    def _emulator(self, ifname: str, netns: str, f: Any) -> _Dropper:
        self.at.append((ifname, netns))
        return self.em


def test_fabric_gray_loss_drops_at_the_sending_switch_port_from_the_onset() -> None:
    from mininet_topos.faults.recovery_run import _FabricGrayLoss
    from mininet_topos.faults.spec import FaultSpec

    inj = _GrayInj()
    g = _FabricGrayLoss(inj)   # type: ignore[arg-type]
    f = FaultSpec(kind="gray_loss", target="s3:3->s1:1", onset_s=2.0, duration_s=60.0, loss=0.05)
    g.arm(f)
    g.prepare(f, 0.0)
    assert inj.at == [("s3-eth3", "ns-s3")] and inj.em.loss == []    # attached once, loss off
    g.apply(f)
    assert inj.em.loss == [0.05] and inj.applied == [{"kind": "gray_loss", "target": "s3:3->s1:1"}]
    g.heal()
    assert inj.healed
