"""End to end on P4 switches: the kinds that change a port's queue or rate (rate
degradation, congestion, tiny queue) injected into the two-DC test bed's running
switches, each with an effect the ground truth records, and named by the diagnosis.

Why these are separate from the gray-loss / link-down test: on kernel routers they are
tc changes of the router's own port; on softswitch they reach into the switch (the eBPF
target's virtual queue in its BPF map, the HTB the eBPF target shapes its ports with,
an HTB put behind the Python target's port), and the test shows each one acts: the
tiny queue drops in the switch's program and its statistics count the drops, the slow
port's FIFO overflows, the background traffic fills the port."""
from __future__ import annotations

from pathlib import Path

import pytest

from mininet_topos.faults.harness import HarnessConfig, run_harness
from mininet_topos.faults.spec import FaultSpec

pytestmark = [pytest.mark.mininet, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow,
              pytest.mark.timeout(900)]


def _fault(kind: str, target: str, **kw: float) -> FaultSpec:
    return FaultSpec(kind=kind, target=target, onset_s=2.5, duration_s=60, **kw)


def test_queue_kinds_on_the_ebpf_target(tmp_path: Path) -> None:
    def plan(places: dict[str, list[str]]) -> list[FaultSpec | None]:
        assert places["tiny_queue"] and places["rate_degraded"] and places["congestion"]
        fabric = [x for x in places["rate_degraded"] if x not in places["gray_loss"]]
        return [_fault("tiny_queue", places["tiny_queue"][0], queue_pkts=1),
                _fault("rate_degraded", fabric[0], factor=0.05),
                _fault("congestion", fabric[-1], rate_mbps=120.0)]
    lines: list[str] = []
    s = run_harness(HarnessConfig(out=tmp_path, seed=5, switch="ebpf"),
                    log=lines.append, plan=plan)
    text = "\n".join(lines)
    tiny, slow, busy = s["per_trial"]
    # the virtual queue cut to one packet dropped in the program, counted by the switch
    drops = tiny["fault"]["injected_drops"]
    assert next(v for k, v in drops.items() if k.endswith("virtual queue")) > 0, text
    for t in (tiny, slow, busy):
        assert t["correct_top3"], text


def test_rate_degradation_behind_the_python_target(tmp_path: Path) -> None:
    def plan(places: dict[str, list[str]]) -> list[FaultSpec | None]:
        assert "tiny_queue" not in places and "congestion" not in places
        fabric = [x for x in places["rate_degraded"] if x not in places["gray_loss"]]
        return [_fault("rate_degraded", fabric[0], factor=0.05)]
    lines: list[str] = []
    s = run_harness(HarnessConfig(out=tmp_path, seed=5, switch="softswitch"),
                    log=lines.append, plan=plan)
    assert s["per_trial"][0]["correct_top3"], "\n".join(lines)
