"""End to end on real namespaces: the two-DC test bed on kernel routers, a ring
all-reduce of four real rank processes, faults injected at their onset, and the
diagnosis of their logs and the routers' counters naming the injected component:
a 5 % silent loss on the busiest WAN direction, a slow receiver host, a straggler rank,
a rate cut on a fabric link, a fault-free run that must stay "no fault", and a
one-packet queue right after a host (it must drop packets: a fault with no effect
would be nothing to localise)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mininet_topos.faults.harness import HarnessConfig, run_harness
from mininet_topos.faults.spec import FaultSpec

pytestmark = [pytest.mark.mininet, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow,
              pytest.mark.timeout(900)]


def test_four_faults_are_localised_and_a_clean_run_is_not_flagged(tmp_path: Path) -> None:
    def plan(places: dict[str, list[str]]) -> list[FaultSpec | None]:
        assert places["gray_loss"], "the ring crosses no WAN direction"
        wan = places["gray_loss"][0]
        fabric = next(x for x in places["rate_degraded"] if x not in places["gray_loss"])
        return [
            FaultSpec(kind="gray_loss", target=wan, onset_s=2.5, duration_s=60, loss=0.05),
            FaultSpec(kind="slow_receiver", target="h5", onset_s=2.5, duration_s=60,
                      delay_s=0.3),
            FaultSpec(kind="straggler", target="2", onset_s=2.5, duration_s=60),
            FaultSpec(kind="rate_degraded", target=fabric, onset_s=2.5, duration_s=60,
                      factor=0.05),
            None,
            FaultSpec(kind="tiny_queue", target=places["tiny_queue"][0], onset_s=2.5,
                      duration_s=60, queue_pkts=1),
        ]
    lines: list[str] = []
    s = run_harness(HarnessConfig(out=tmp_path, seed=5), log=lines.append, plan=plan)
    trials = s["per_trial"]
    text = "\n".join(lines)
    # every fault among the first three, and named first for the network kinds and the
    # straggler; a slow receiver can lose first place to the host its ACKs go to when
    # only its outgoing pair slowed enough (both then hold the same evidence)
    assert [t["correct_top3"] for t in trials] == [True] * 6, text
    assert [trials[i]["correct_top1"] for i in (0, 2, 3, 4, 5)] == [True] * 5, text
    # every network fault is on a pair's path; the tiny queue really dropped packets
    for i in (0, 1, 3, 5):
        assert trials[i]["fault"]["crossed_by"], trials[i]["fault"]
    tq = trials[5]["fault"]
    assert "after host" in tq["queues_because"]
    assert sum(v for k, v in tq["injected_drops"].items() if k.endswith(" tail")) > 0, tq
    assert s["false_alarms"] == 0
    assert (tmp_path / "summary.json").is_file()
    for t in trials:
        assert (tmp_path / f"trial{t['trial']:03d}" / "ground_truth.json").is_file()
