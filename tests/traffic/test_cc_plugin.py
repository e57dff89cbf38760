"""Adding a congestion-control algorithm is its module, its tests and one registry
line: this module is all three for a trivial one, ``test-half-rate`` (pace at half the
line rate, count the bytes the QP reports sent), and runs it in an 3-host incast through
the real traffic runner (``python -m traffic`` per host namespace on a Linux bridge,
prefix "ttr").  The senders are other processes: they import this module through
``$TRAFFIC_CC_MODULES`` (traffic.cc.registry), as an out-of-tree algorithm would be."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from netns_util import run_ranks, star

from traffic.cc import registry
from traffic.cc.base import SenderCc, SenderCcBase
from traffic.errors import ConfigError
from traffic.qp_types import QpConfig
from traffic.requester import Requester


class HalfRate(SenderCcBase):
    """Half the line rate, always; counts the bytes sent (``on_sent``)."""

    name = "test-half-rate"
    snapshot_key = "half_rate"

    def __init__(self, line_rate_bps: float) -> None:
        super().__init__(line_rate_bps)
        self.sent_bytes = 0

    @property
    def rate_bps(self) -> float:
        return self.line_rate_bps / 2

    def on_sent(self, nbytes: int) -> None:
        self.sent_bytes += nbytes

    def snapshot(self) -> dict[str, Any]:
        return {"rate_bps": self.rate_bps, "sent_bytes": self.sent_bytes}


# the one registry line
registry.register(registry.CcAlgorithm(name="test-half-rate", runs_in="sender",
                                       summary="half the line rate (a test's algorithm)",
                                       sender=lambda cfg, now: HalfRate(cfg.rate_bps)),
                  replace=True)


def test_registered_algorithm_is_a_choice_everywhere() -> None:
    assert "test-half-rate" in registry.names(("sender",))
    assert "test-half-rate" not in registry.names(("controller",))
    cfg = QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", cc="Test-Half-Rate", rate_bps=8e6)
    req = Requester(cfg=cfg, local_ip="10.0.0.1", sport=49152)
    assert isinstance(req.cc, HalfRate) and isinstance(req.cc, SenderCc)
    assert req.cfg.rate_bps == 4e6  # its first rate paces the first packet
    with pytest.raises(ConfigError, match="choose one of none, dcqcn, hpcc-sender, test-half"):
        QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", cc="hpcc")  # the controller's


@pytest.mark.root
def test_registered_algorithm_runs_an_incast(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    here = str(Path(__file__).parent)
    monkeypatch.setenv(registry.PLUGIN_ENV, Path(__file__).stem)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [here, *os.environ.get("PYTHONPATH", "").split(os.pathsep)])))
    with star(3, subnet_prefix="10.79.0") as hosts:
        outs = run_ranks(hosts, "incast", ["-s", "16K", "-c", "4", "--rate", "8M",
                                           "--cc", "test-half-rate"], tmp_path, timeout=60)
    assert all(o["finished"] for o in outs)
    assert sum(r["msgs_done"] for r in outs[0]["endpoint"]["responders"].values()) == 8
    for o in outs[1:]:
        assert o["cc"]["mode"] == "test-half-rate"
        assert set(o["cc"]["final_rate_bps"].values()) == {4e6}
        (req,) = o["endpoint"]["requesters"].values()
        # every byte the QP put on the wire went through the algorithm's hook
        assert req["half_rate"]["sent_bytes"] == req["tx_bytes"] > 16 * 1024 * 4
