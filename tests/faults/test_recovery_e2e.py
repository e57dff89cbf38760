"""End to end: ``experiment faults --mitigate act`` on the two-DC test bed with
softswitch's eBPF target.  A leaf-spine link the ring's INT paths cross goes down;
on the bed whose controller acts, it names the link from the link loss map alone
(nothing tells it about the fault), rewrites the routes around it, the INT paths stop
crossing it and the job completes; on the bed whose controller only advises, the same
fault leaves the job's transfers on the dead link.  The fault-free run draws no action.
Times are reported, not asserted (they move with the machine's load)."""
from __future__ import annotations

from pathlib import Path

import pytest

from mininet_topos.faults.recovery_run import RecoveryConfig, run_recovery

pytestmark = [pytest.mark.mininet, pytest.mark.root, pytest.mark.bpf, pytest.mark.slow,
              pytest.mark.timeout(1200)]


def test_a_dead_fabric_link_is_routed_around_and_the_job_completes(tmp_path: Path) -> None:
    lines: list[str] = []
    s = run_recovery(RecoveryConfig(out=tmp_path, switch="ebpf", seeds=(1,),
                                    kinds=("link_down",), fault_free=1, flap=False),
                     log=lines.append)
    text = "\n".join(lines)
    (row,) = s["mitigation"]
    assert row["fault"] == "link_down" and row["action"] == "reroute", text
    act = next(t for t in s["trials"]["act"] if t["fault"])
    assert act["action"]["outcome"] == "written", act["action"]
    assert act["action"]["source"] == "lossmap", act["action"]
    assert row["onset_to_off_s"] is not None and row["onset_to_off_s"] > 0, text
    # the INT paths after the routes were written keep off the dead link
    assert act["int_samples_after_off"], text
    assert act["int_samples_on_link_after_off"] == 0, text
    assert row["completion_ratio_mitigated"] is not None, text   # the job completed
    adv = next(t for t in s["trials"]["advise"] if t["fault"])
    assert adv["action"] is not None and adv["onset_to_off_s"] is None, adv  # advised only
    assert s["actions_fault_free"] == 0, text
