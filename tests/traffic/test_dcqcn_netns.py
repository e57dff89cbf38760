"""DCQCN with real packets: two senders into one receiver through a softswitch that
marks ECN (p4/examples/ecn_marking.p4) at a paced bottleneck port; the receiver's
endpoint answers CE with CNPs, and ``--cc dcqcn`` senders cut their rates where
``--cc none`` senders keep theirs and overflow the switch queue (prefix "dq")."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from netns_util import ROOT, port_stats, run_ranks, softswitch_star

from common.kernel.netns import Namespace

pytestmark = [pytest.mark.root, pytest.mark.slow]

PROGRAM = Path(ROOT) / "p4" / "examples" / "ecn_marking.p4"
SUBNET = "10.79.0"
BOTTLENECK_MBPS = 4
MARK_PKTS = 4
QUEUE_PKTS = 64


def _entries(hosts: list[Namespace]) -> str:
    return "".join(
        f"add MyIngress.ipv4_host hdr.ipv4.dstAddr:0x0a4f00{i + 1:02x} "
        f"MyIngress.forward(port:{i + 1})\n" for i in range(len(hosts))) + (
        f"setdefault MyEgress.ecn_config MyEgress.set_threshold(qdepth:{MARK_PKTS})\n")


def marking_star(n: int, tmp: Path) -> contextlib.AbstractContextManager[
        tuple[list[Namespace], Path]]:
    """``n`` hosts on one softswitch; port 1 (host 0, the receiver) paced at
    ``BOTTLENECK_MBPS`` with a ``QUEUE_PKTS`` queue, CE marked from ``MARK_PKTS``
    packets queued.  Yields the hosts and the switch's statistics file.  The program
    forwards by address only (no MAC rewrite): static neighbours with the hosts' MACs."""
    return softswitch_star(n, tmp, prefix="dq", subnet=SUBNET, program=PROGRAM,
                           entries=_entries, neigh_mac=None,
                           queue_rate_mbps=BOTTLENECK_MBPS, queue_depth_pkts=QUEUE_PKTS,
                           ready_timeout_s=60)


def _incast(tmp: Path, cc: str) -> tuple[list[dict], dict]:
    out = tmp / cc
    out.mkdir()
    with marking_star(3, out) as (hosts, stats):
        # two senders at 4 Mbit/s each into the 4 Mbit/s port: 2x overload
        outs = run_ranks(hosts, "incast", ["-s", "64K", "-c", "8", "--rate", "4M",
                                           "--cc", cc, "--window", "128"], out,
                         timeout=60)
    return outs, port_stats(stats, 1)


def test_dcqcn_senders_cut_on_cnps_from_a_marking_switch(tmp_path):
    none, port_none = _incast(tmp_path, "none")
    dcqcn, port_dcqcn = _incast(tmp_path, "dcqcn")
    for outs in (none, dcqcn):
        assert all(o["finished"] for o in outs)
        rx = outs[0]["endpoint"]["responders"]
        assert sum(r["msgs_done"] for r in rx.values()) == 16
        assert outs[0]["endpoint"]["endpoint"]["cnps_tx"] > 0  # the switch marked
    # no CC: CNPs counted, rates untouched; the 64-packet queue overflowed
    for o in none[1:]:
        assert o["cc"]["mode"] == "none" and o["cc"]["cnps_rx"] > 0
        assert set(o["cc"]["final_rate_bps"].values()) == {4e6}
    assert port_none["tail_drops"] > 0, port_none
    # DCQCN: every sender took CNPs and cut its rate below its line rate
    for o in dcqcn[1:]:
        cc = o["cc"]
        assert cc["mode"] == "dcqcn" and cc["cnps_rx"] >= cc["cnps_applied"] > 0, cc
        assert cc["rate_cuts"] > 0 and cc["min_rate_bps"] < 4e6, cc
        (req,) = o["endpoint"]["requesters"].values()
        assert req["dcqcn"]["rate_cuts"] == cc["rate_cuts"]
        assert len(req["rate_changes"]) > 2
    # ... and the switch queue overflowed less (load-independent: a ratio of drops)
    assert port_dcqcn["tail_drops"] < port_none["tail_drops"] / 2, (port_dcqcn, port_none)
