"""A full controller run whose HPCC feedback reaches a real host agent and a real
traffic sender: the agents' confirmations come back to the running controller, and
the state file shows the loop latency up to "rate applied".

The switches are in-process P4Runtime servers (as in test_runner); the sender host
h1 is a namespace joined to the root namespace by a veth: `python -m ebpf.agent`
and `python -m traffic p2p` (rank 0, the requester) run there, the receiver (rank 1)
on the root end.  The controller is told h1's agent address with `agents`."""
from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ctl_app_helpers import ROOT, SwitchBed

from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("needs root for namespaces and BPF", allow_module_level=True)

from common.kernel.netns import Interface, Namespace, delete_link, veth_pair
from controller.int.synth import Hop, build_hpcc_report
from controller.runner import Controller, RunConfig, read_state
from traffic.control import query_stats
from traffic.errors import ControlError
from traffic.workloads import connection_qpn

QP = connection_qpn(0, 1, 0)
FB_PORT = 32768
NS_IP, ROOT_IP = "10.77.66.2", "10.77.66.1"


@pytest.fixture
def sender_host() -> Iterator[tuple[Namespace, Interface]]:
    ns = Namespace.create("lp")
    root_end = None
    try:
        ns_end, root_end = veth_pair(ns, None, prefix="lp", addr_a=f"{NS_IP}/24",
                                     addr_b=f"{ROOT_IP}/24")
        ns.ifname = ns_end.ifname
        yield ns, root_end
    finally:
        ns.close()
        if root_end is not None:
            delete_link(root_end)


def _reports(first: int, n: int) -> list[bytes]:
    """Reports from sink s2 for h1 -> h5 on QP 256: the s1 -> s2 hop is busy."""
    out = []
    for i in range(first, first + n):
        ts = 1000 + 100 * i
        tx = 1100 * i
        s1 = Hop(node_id=1, egress_ts_us=ts, tx_bytes=tx, queue_bytes=30_000, queue_pkts=20,
                 line_rate_mbps=100)
        s2 = Hop(node_id=2, egress_port=1, egress_ts_us=ts + 5, tx_bytes=tx, queue_bytes=0,
                 line_rate_mbps=100)
        out.append(build_hpcc_report(node_id=2, seq=i, hops=[s1], sink=s2, src_ip="10.0.1.1",
                                     dst_ip="10.0.2.1", sport=50000, dest_qp=QP, psn=i))
    return out


def test_running_controller_reports_decision_to_applied(testbed: SwitchBed, tmp_path: Path,
                                                        sender_host) -> None:
    ns, _root_end = sender_host
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ctl_sock = str(tmp_path / "h1.sock")
    common = [sys.executable, "-m", "traffic", "p2p", "--hosts", f"{NS_IP},{ROOT_IP}",
              "-s", "64K", "-c", "2000", "--rate", "20M", "--timeout", "120"]
    receiver = subprocess.Popen([*common, "--rank", "1", "0.5"], cwd=ROOT, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ctl = None
    try:
        ns.popen([*common, "--rank", "0", "--control", ctl_sock, "0.5"], cwd=ROOT, env=env,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agent = ns.popen([sys.executable, "-m", "ebpf.agent", "--iface", ns.ifname,
                          "--feedback-port", str(FB_PORT), "--control", ctl_sock,
                          "--insecure", "0.2"],   # a private test namespace, no key
                         cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
        assert agent.stdout is not None
        assert select.select([agent.stdout], [], [], 60)[0] and "rec" in agent.stdout.readline()
        assert wait_for(lambda: qp_sent(ctl_sock) > 20, timeout_s=30)

        ctl = Controller(cfg=RunConfig(topology=str(testbed.topology), out_dir=str(tmp_path / "out"),
                                       report_port=0, agent_port=0, status_interval_s=0.2,
                                       connect_timeout_s=2.0, agents={"h1": (NS_IP, FB_PORT)}))
        ctl.start()
        assert ctl.collector is not None and ctl.collector.report_address is not None
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for k in range(4):        # a few batches of telemetry, a few decisions
                for d in _reports(30 * k, 30):
                    tx.sendto(d, ctl.collector.report_address)
                time.sleep(0.2)
        finally:
            tx.close()

        def applied() -> bool:
            ctl.tick()
            lat = read_state(ctl.cfg.state_file)["collector"]["loop_decision_to_applied_s"]
            return lat is not None and lat["count"] >= 1

        assert wait_for(applied, timeout_s=15, step_s=0.2)
        coll = read_state(ctl.cfg.state_file)["collector"]
        lat = coll["loop_decision_to_applied_s"]
        assert 0 < lat["p50"] <= lat["max"] < 5
        tel = coll["loop_telemetry_to_applied_s"]
        assert tel["count"] == lat["count"] and tel["max"] >= lat["p50"]
        assert coll["feedback_confirmations"].get("APPLIED", 0) >= 1
        assert coll["loop_telemetry_to_decision_s"]["count"] >= 1
        # the sender really took the controller's rates (it started at 20 Mbit/s)
        changes = query_stats(ctl_sock)["requesters"][str(QP)]["rate_changes"]
        assert len(changes) >= 2 and all(0 < r <= 100e6 for _t, r in changes[1:])
        assert changes[-1][1] != 20e6
    finally:
        if ctl is not None:
            ctl.stop()
        receiver.terminate()
        try:
            receiver.wait(timeout=10)
        except subprocess.TimeoutExpired:
            receiver.kill()
            receiver.wait()


def qp_sent(ctl_sock: str) -> int:
    try:
        return int(query_stats(ctl_sock, timeout_s=1.0)["requesters"][str(QP)]["tx_data_pkts"])
    except (OSError, ControlError, KeyError):   # the endpoint is not up yet
        return 0
