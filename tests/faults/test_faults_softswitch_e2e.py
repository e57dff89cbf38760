"""End to end on P4 switches: the two-DC test bed on softswitch with the controller and
the hosts' eBPF agents, a ring all-reduce of four real rank processes, faults injected
at their onset, and the diagnosis of the ranks' logs and the controller's exports
(INT paths, link sequence loss) naming the injected component: a 5 % silent loss on a
WAN direction the INT paths cross, a slow receiver, and a fault-free run."""
from __future__ import annotations

from pathlib import Path

import pytest

from mininet_topos.faults.harness import HarnessConfig, run_harness
from mininet_topos.faults.spec import FaultSpec

pytestmark = [pytest.mark.mininet, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow,
              pytest.mark.timeout(900)]


def test_faults_on_softswitch_are_localised_on_int_paths(tmp_path: Path) -> None:
    seen: dict[str, list[str]] = {}

    def plan(places: dict[str, list[str]]) -> list[FaultSpec | None]:
        seen.update(places)
        assert places["gray_loss"], "the INT paths cross no WAN direction"
        return [
            FaultSpec(kind="gray_loss", target=places["gray_loss"][0], onset_s=2.5,
                      duration_s=60, loss=0.05),
            FaultSpec(kind="slow_receiver", target="h5", onset_s=2.5, duration_s=60,
                      delay_s=0.3),
            None,
        ]
    lines: list[str] = []
    s = run_harness(HarnessConfig(out=tmp_path, seed=5, switch="softswitch"),
                    log=lines.append, plan=plan)
    text = "\n".join(lines)
    trials = s["per_trial"]
    assert s["testbed"]["switch"] == "softswitch"
    assert [t["correct_top3"] for t in trials] == [True] * 3, text
    assert trials[0]["correct_top1"] and trials[2]["correct_top1"], text
    assert s["false_alarms"] == 0
    loss = trials[0]
    assert loss["fault"]["paths_from"] == "int" and loss["fault"]["crossed_by"]
    top = loss["diagnosis"]["culprits"][0]
    # the pairs on the culprit were weighed on their INT paths, not every ECMP path
    assert top["evidence"]["int_paths_on_it"] >= 1, top
    assert set(seen["link_down"]) >= set(seen["gray_loss"])
