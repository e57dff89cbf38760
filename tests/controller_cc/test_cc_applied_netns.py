"""The loop closed to "rate applied" with real processes: telemetry into the HPCC loop,
feedback from a namespace over a veth to a real host agent (`python -m ebpf.agent`)
that relays it to a real traffic sender (`python -m traffic p2p`), whose endpoint
confirms; the confirmation comes back and gives the loop latency and the PSN."""
from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("needs root for namespaces and BPF", allow_module_level=True)

from common.kernel.netns import Namespace, two_hosts
from controller.cc import FeedbackSender, HpccEngine, HpccParams
from controller.cc.loop import FeedbackTarget, HpccLoop
from controller.int.collector import Collector, CollectorConfig
from controller.int.synth import Hop, build_hpcc_report
from formats.feedback import ConfirmStatus
from traffic.control import query_stats
from traffic.errors import ControlError
from traffic.workloads import connection_qpn

ROOT = Path(__file__).resolve().parents[2]
QP = connection_qpn(0, 1, 0)        # rank 0 (h2, the sender) -> rank 1 (h1), channel 0
FB_PORT = 32768


@pytest.fixture
def hosts() -> Iterator[tuple[Namespace, Namespace]]:
    with two_hosts("lp", subnet="10.77.63.0/24") as pair:
        yield pair


def _line(proc: subprocess.Popen, timeout_s: float) -> str:
    assert proc.stdout is not None
    if select.select([proc.stdout], [], [], timeout_s)[0]:
        return proc.stdout.readline()
    return ""


def _reports(h1: Namespace, h2: Namespace, first: int, n: int) -> list[bytes]:
    """Telemetry of the flow h2 -> h1: one hop at 100 Mbit/s with a 30 KB queue."""
    out = []
    for i in range(first, first + n):
        hop = Hop(node_id=1, egress_ts_us=1000 + 100 * i, tx_bytes=1250 * i,
                  queue_bytes=30_000, line_rate_mbps=100)
        out.append(build_hpcc_report(node_id=9, seq=i, hops=[hop], src_ip=h2.ip, dst_ip=h1.ip,
                                     sport=49152, dest_qp=QP, psn=i))
    return out


def _requester(stats: dict) -> dict:
    return stats["requesters"][str(QP)]


def test_feedback_is_confirmed_with_the_requesters_psn(hosts, tmp_path) -> None:
    h1, h2 = hosts
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ctl2 = str(tmp_path / "h2.sock")
    common = [sys.executable, "-m", "traffic", "p2p", "--hosts", f"{h2.ip},{h1.ip}",
              "-s", "64K", "-c", "2000", "--rate", "20M", "--timeout", "120"]
    h1.popen([*common, "--rank", "1", "-o", str(tmp_path / "r1.json"), "0.5"], env=env,
             cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    sender_proc = h2.popen([*common, "--rank", "0", "--control", ctl2, "-o",
                            str(tmp_path / "r0.json"), "0.5"], env=env, cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    agent = h2.popen([sys.executable, "-m", "ebpf.agent", "--iface", h2.ifname,
                      "--feedback-port", str(FB_PORT), "--control", ctl2,
                      "--insecure", "0.2"], env=env,   # a private test namespace, no key
                     cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert "rec" in _line(agent, 60), agent.stderr.read() if agent.poll() is not None else ""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if _requester(query_stats(ctl2))["tx_data_pkts"] > 50:
                break
        except (OSError, ControlError, KeyError):   # not up yet
            pass
        time.sleep(0.2)
    else:
        pytest.fail(f"the sender never sent: {sender_proc.stderr.read() if sender_proc.poll() is not None else ''}")

    eng = HpccEngine(n_flows=16, params=HpccParams(base_rtt_s=200e-6))
    fb = FeedbackSender(n_flows=16, min_change_fraction=0.0)
    with h1.enter():
        fb.sock.bind(("0.0.0.0", 0))           # the controller's socket lives in h1
    loop = HpccLoop(engine=eng, sender=fb, resolve=lambda s: FeedbackTarget(
        agent=(h2.ip, FB_PORT), flow_id=int(s["dest_qp"]), max_rate_bps=100e6))
    col = Collector(CollectorConfig(report_port=0, agent_port=None, flow_capacity=16),
                    listeners=[loop])
    try:
        psn_before = _requester(query_stats(ctl2))["tx_data_pkts"]
        t = time.monotonic_ns()
        col.feed_reports(_reports(h1, h2, 0, 20), arrival_ns=t)
        assert loop.stats.records_sent == 1
        deadline = time.monotonic() + 10
        while loop.stats.confirmations < 1 and time.monotonic() < deadline:
            if select.select([fb.sock], [], [], 0.5)[0]:
                loop.poll_confirmations()
        c = loop.last_confirmations
        assert c is not None and len(c) == 1
        assert ConfirmStatus(int(c.status[0])) is ConfirmStatus.APPLIED
        psn_after = _requester(query_stats(ctl2))["tx_data_pkts"]
        # the endpoint starts its PSNs at 0: the applied PSN counts the data packets
        # sent before the new rate took effect
        assert psn_before <= int(c.applied_psn[0]) <= psn_after
        st = eng.stats()
        assert st.decision_to_applied.count == 1 and st.telemetry_to_applied.count == 1
        assert 0 < st.decision_to_applied.max_s < 5.0
        assert c.hold_ns[0] > 0
        rate = eng.state.rate_bps[int(c.flow_idx[0])]
        changes = _requester(query_stats(ctl2))["rate_changes"]
        assert any(abs(r - round(rate)) <= 1 for _t, r in changes), (rate, changes)
        # a second round: more telemetry, the next decision confirmed too
        col.feed_reports(_reports(h1, h2, 20, 20), arrival_ns=t + 10_000_000)
        deadline = time.monotonic() + 10
        while loop.stats.confirmations < 2 and time.monotonic() < deadline:
            if select.select([fb.sock], [], [], 0.5)[0]:
                loop.poll_confirmations()
        assert eng.stats().decision_to_applied.count == 2
        assert np.all(loop.last_confirmations.applied_psn >= c.applied_psn[0])
    finally:
        col.stop()
        fb.close()
