"""A loss that stopped is no gray loss (table-driven, on the link rows of the P4 runs).

A faulty link keeps losing at its rate in every read that carries enough packets; the
test bed's go-back-N bursts overflow a leaf's ingress after the WAN once (a slow
receiver's hold makes such bursts) and the link then carries thousands cleanly.  The
rows are ``(seconds after the onset, delivered, lost)`` as the runs read them."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.diagnose.engine import _link_features, _link_kind
from controller.diagnose.evidence import Evidence, LossSample, Telemetry
from controller.topology.load import load_topology

TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")
ON = 1.7e9
LINK = "s5:1->s7:3"

CASES = {
    # eBPF seed 4 trial 18: h3 slow, its sender's burst lost once on s5:1->s7:3
    "slow receiver's burst, then clean": ([(1.3, 7725, 558), (7.3, 8882, 0)], 0.3),
    # eBPF seed 3 trial 15 (a rate degradation elsewhere): the same, then two clean reads
    "burst beside another fault": ([(2.8, 6800, 803), (5.8, 2726, 1), (8.8, 1477, 0)], 0.3),
    # a 1 % gray loss seen in one read so far (the next read not yet made)
    "loss in the last read": ([(-1.0, 4459, 0), (7.0, 13816, 91)], None),
    # a gray loss read three times: it persists
    "loss in every read": ([(1.8, 7657, 69), (5.8, 5281, 339), (8.8, 2665, 171)], None),
    # the Python target's rate degradation: one read of 579 packets lost only 5, then
    # the loss again (too few packets to say it stopped)
    "a quiet read between lossy ones": ([(3.7, 1117, 721), (8.7, 579, 5), (11.7, 1648, 1292)],
                                        None),
}


@pytest.mark.parametrize("case", list(CASES))
def test_loss_that_stopped(case: str) -> None:
    rows, strength = CASES[case]
    ev = Evidence(topo=TOPO, records=[], telemetry=Telemetry(link_loss={LINK: [
        LossSample(t=ON + t, lost=lost, delivered=d) for t, d, lost in rows]}))
    kind, s, evid = _link_kind(_link_features(ev, LINK, None, ON, set()), False,
                               loss_min=2e-3)
    assert kind == "gray_loss"
    if strength is None:
        assert s >= 0.6 and "clean_since_pkts" not in evid
    else:
        assert s == strength and evid["clean_since_pkts"] >= 2000
