"""The recovery experiment's flow on a stand-in test bed (no network): both beds run
their warm-up, fault-free trials, one trial per kind and seed with the same links, the
flapping link on the acting bed only; the rows join the beds by (kind, seed), ratios
against each bed's own fault-free runs, the acting bed's actions read from the
controller's state file.  The real run: ``experiment recovery_faults`` (presets README)."""
from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import mininet_topos.faults.recovery_run as rr
from controller.diagnose.evidence import FlowSample, Telemetry
from mininet_topos import testbed
from traffic.collog.records import CollRecord

STEP_S = 0.1


class FakeBed:
    def __init__(self, *, logs: Path, mitigate: str, **_: Any) -> None:
        self.logs, self.mode = logs, mitigate
        (logs / "controller").mkdir(parents=True, exist_ok=True)
        self.actions: list[dict[str, Any]] = []
        self.state()

    def state(self) -> None:
        (self.logs / "controller" / "controller_state.json").write_text(json.dumps(
            {"mitigation": {"avoided": [], "written_avoid": [], "actions": self.actions}}))


@contextlib.contextmanager
def fake_testbed(**kw: Any) -> Iterator[FakeBed]:
    yield FakeBed(**kw)


def fake_run_ranks(tb: FakeBed, cfg: Any, topo: Any, tdir: Path, fault: Any, inj: Any
                   ) -> tuple[float, float]:
    """18 steps of STEP_S; a fault makes the steps after its onset 5x slower, or 2x
    once the acting bed rerouted (at the onset + 1 s), or never end (link down, advise)."""
    start = 1000.0 + 100 * len(list(tdir.parent.iterdir()))
    (tdir / "collectives").mkdir(parents=True)
    t, lines = start, []
    onset = start + (fault.onset_s if fault else 1e9)
    for i in range(18):
        d = STEP_S
        end: float | None = None
        if t >= onset:
            d = STEP_S * (5 if tb.mode == "advise" else (2 if t < onset + 1 else 1))
        end = None if t >= onset and fault.kind == "link_down" and tb.mode == "advise" else t + d
        for r in range(4):
            lines.append(CollRecord(rank=r, comm="c", op="allreduce", seq=i // 6, step=i % 6,
                                    dir="send", start=t, end=end).to_json())
        t += d
    (tdir / "collectives" / "rank0.jsonl").write_text("\n".join(lines) + "\n")
    if fault is not None:
        link = rr._link_of(topo, fault.target)
        tb.actions.append({"verb": "reroute", "avoid": [link], "at": onset + 1.0,
                           "outcome": "written" if tb.mode == "act" else "advised",
                           "write_s": 0.05, "kind": fault.kind, "source": "lossmap"})
        tb.state()
        tb.last = (onset, fault.target)
    return start, t


def fake_telemetry(self: Any, since: float, end: float) -> Telemetry:
    onset, target = self.tb.last
    return Telemetry(flows=[FlowSample(t=onset + 3, src="a", dst="b", qp=1, path=("x->y",)),
                            FlowSample(t=onset - 1, src="a", dst="b", qp=1, path=(target,))])


@pytest.fixture
def stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testbed, "Testbed", fake_testbed)
    monkeypatch.setattr(rr, "_run_ranks", fake_run_ranks)
    monkeypatch.setattr(rr._Bed, "_telemetry", fake_telemetry)
    monkeypatch.setattr(rr, "_evaluate", lambda ev, f, start: {
        "correct_top1": True, "time_to_localise_s": 0.5})
    monkeypatch.setattr(rr, "Injector", lambda **kw: SimpleNamespace(**kw))
    monkeypatch.setattr(rr, "int_places", lambda topo, tel, hosts: {
        "gray_loss": ["s1:3->s5:3"], "link_down": ["s1:3->s5:3", "s3:3->s1:1"]})
    monkeypatch.setattr(rr._Flapper, "__init__", lambda self, inj, p: setattr(self, "inj", inj))
    monkeypatch.setattr(rr.time, "sleep", lambda s: None)
    monkeypatch.setattr(rr._Bed, "warm_up", warm_up)


def warm_up(self: Any) -> None:
    self.tb.last = (0.0, "")
    self.warm_sends = 72
    self.places = rr.int_places(self.topo, None, ())
    self.hcfg = rr.replace(self.hcfg, trial_s=5.0)


def test_both_beds_run_the_same_faults_and_rows_join_them(stand_in: None, tmp_path: Path) -> None:
    lines: list[str] = []
    s = rr.run_recovery(rr.RecoveryConfig(out=tmp_path, seeds=(1, 2), fault_free=3,
                                            onset_s=0.55),
                        log=lines.append)
    text = "\n".join(lines)
    assert [t["trial"] for t in s["trials"]["act"]] == [
        "free00", "gray_loss-s1", "link_down-s1", "free01", "gray_loss-s2", "link_down-s2",
        "free02", "flap"], text
    assert [t["trial"] for t in s["trials"]["advise"]][-1] == "free02"
    assert len(s["mitigation"]) == 4 and not s["errors"]
    down = next(r for r in s["mitigation"] if r["fault"] == "link_down")
    assert down["target"] == "s3:3->s1:1"
    assert down["onset_to_action_s"] == pytest.approx(1.0)
    assert down["onset_to_off_s"] == pytest.approx(1.05)
    assert down["int_samples_on_link_after_off"] == 0
    assert down["completion_ratio_unmitigated"] is None      # hung without the reroute
    # 6 steps at pace, 5 at half pace (until the reroute), 7 at pace: against 18 at pace
    assert down["completion_ratio_mitigated"] == pytest.approx(2.3 / 1.8, abs=0.01)
    assert down["onset_to_recovered_s"] == pytest.approx(1.7 - 0.55, abs=0.01)
    gray = next(r for r in s["mitigation"] if r["fault"] == "gray_loss")
    assert gray["target"] == "s3:3->s1:1"          # a fabric link, as link down's
    assert gray["completion_ratio_unmitigated"] == pytest.approx(6.6 / 1.8, abs=0.01)
    assert s["actions_fault_free"] == 0 and s["fault_free_trials"] == 3
    assert s["flap"]["actions"] == 1
    assert json.loads((tmp_path / "summary.json").read_text())["mitigation"] == s["mitigation"]
    assert any(x.startswith("| link_down | 2 |") for x in lines), text


def test_the_acting_bed_alone_runs_no_unmitigated_trials(stand_in: None, tmp_path: Path) -> None:
    s = rr.run_recovery(rr.RecoveryConfig(out=tmp_path, seeds=(1,), fault_free=1, onset_s=0.55,
                                            flap=False, beds=("act",)), log=lambda _: None)
    assert list(s["trials"]) == ["act"] and len(s["mitigation"]) == 2
    assert all(r["completion_ratio_unmitigated"] is None for r in s["mitigation"])


@pytest.mark.parametrize(("text", "error"), [
    ("kind: mitigation_faults\nbeds: [act, acting]\n", "beds acting"),
    ("kind: mitigation_faults\nbeds: []\n", "beds (none)"),
    ("kind: mitigation_faults\npoll: 1\n", "unknown keys poll"),
])
def test_the_preset_refuses_bad_keys(tmp_path: Path, text: str, error: str) -> None:
    p = tmp_path / "p.yaml"
    p.write_text(text)
    with pytest.raises(rr.FaultError, match=error.replace("(", r"\(").replace(")", r"\)")):
        rr.load_recovery_spec(p, tmp_path)


def test_the_preset_sets_poll_recovery_and_beds(tmp_path: Path) -> None:
    cfg = rr.load_recovery_spec(Path(rr.__file__).parents[1] / "presets" / "recovery_faults.yaml", tmp_path)
    assert (cfg.poll_s, cfg.recovery, cfg.beds, cfg.seeds, cfg.fault_free, cfg.allreduces) == \
        (0.5, "gbn", ("act", "advise"), (1, 2, 3), 10, 12)


def test_a_straggler_trial_reads_the_move_and_every_data_check(stand_in: None, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A host kind: the ranks get a standby on each spare, the controller the job file and
    the live collective logs; the row has the move's action and the ranks' data checks
    (the spare that took the rank over included), read from their output lines."""
    monkeypatch.setattr(rr, "int_places", lambda topo, tel, hosts: {
        "link_down": ["s1:3->s5:3"], "straggler": ["0", "1", "2", "3"]})

    def run_ranks(tb: FakeBed, cfg: Any, topo: Any, tdir: Path, fault: Any, inj: Any) -> tuple[float, float]:
        assert cfg.spares == ("h2", "h4", "h6", "h8") and cfg.control
        start = 1000.0 + 100 * len(list(tdir.parent.iterdir()))
        (tdir / "collectives").mkdir(parents=True)
        n = 18 if fault is None else 24
        (tdir / "collectives" / "rank0.jsonl").write_text("".join(
            CollRecord(rank=r, comm="c", op="allreduce", seq=i // 6, step=i % 6, dir="send",
                       start=start + i * STEP_S, end=start + (i + 1) * STEP_S).to_json() + "\n"
            for i in range(n) for r in range(4)))
        for who in ("r0", "r1", "r2", "r3", "h6"):   # h6 took rank 2 over: it reports too
            (tb.logs / f"{tdir.name}-{who}.log").write_text('ready\n{"rank": 0, "result_ok": true}\n')
        (tb.logs / f"{tdir.name}-h2.log").write_text('{"standby": "10.0.1.2", "activated": false}\n')
        if fault is not None:
            tb.actions.append({"verb": "move_rank", "kind": "straggler", "target": f"rank {fault.target}",
                               "at": start + fault.onset_s + 1.5, "outcome": "written",
                               "evidence": {"move": {"at_iter": 2}}})
            tb.state()
        return start, start + n * STEP_S

    monkeypatch.setattr(rr, "_run_ranks", run_ranks)
    s = rr.run_recovery(rr.RecoveryConfig(out=tmp_path, seeds=(1,), kinds=("straggler",), fault_free=1,
                                            onset_s=0.5, flap=False, beds=("act",)), log=lambda _: None)
    [row] = s["mitigation"]
    assert (row["fault"], row["action"], row["moved_at_iter"], row["data_ok"]) == ("straggler", "move_rank", 2, True)
    assert row["onset_to_action_s"] == pytest.approx(1.5) and row["completion_ratio_mitigated"] == pytest.approx(24 / 18, abs=0.001)
    job = json.loads((tmp_path / "act" / "job.json").read_text())
    assert job["ranks"] == ["h1", "h3", "h5", "h7"] and job["spares"] == ["h2", "h4", "h6", "h8"]
    assert (tmp_path / "act" / "live").resolve() == (tmp_path / "act" / "straggler-s1" / "collectives").resolve()
