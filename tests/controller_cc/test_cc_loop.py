"""The whole control loop with real sockets: reports over UDP into the collector,
HPCC on its listener thread, feedback over UDP to an agent socket, decoded as the
host agent decodes it."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from controller.cc import FeedbackSender, HpccEngine, HpccParams, decode_feedback
from controller.cc.loop import FeedbackTarget, HpccLoop

int_pkg = pytest.importorskip("controller.int")
synth = pytest.importorskip("controller.int.synth")


def report(seq: int, ts_us: int, tx: int, q: int, sport: int) -> bytes:
    hops = [synth.Hop(node_id=1, egress_ts_us=ts_us, tx_bytes=tx, queue_bytes=0,
                      line_rate_mbps=10_000),
            synth.Hop(node_id=2, egress_ts_us=ts_us, tx_bytes=tx, queue_bytes=q,
                      line_rate_mbps=10_000)]
    return synth.build_hpcc_report(node_id=9, seq=seq, hops=hops, sport=sport, dest_qp=0x22)


def test_reports_in_feedback_out():
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(5.0)
    cfg = int_pkg.CollectorConfig(report_port=0, agent_port=None, flow_capacity=64)
    resolved = []

    def resolve(sample: np.ndarray) -> FeedbackTarget | None:
        resolved.append(int(sample["sport"]))
        if int(sample["sport"]) == 50000:
            return None  # e.g. a sender without an agent
        return FeedbackTarget(agent=agent.getsockname(), flow_id=100 + len(resolved),
                              max_rate_bps=10e9, base_rtt_s=20e-6)

    eng = HpccEngine(n_flows=cfg.flow_capacity, params=HpccParams(base_rtt_s=20e-6))
    sender = FeedbackSender(n_flows=cfg.flow_capacity)
    loop = HpccLoop(engine=eng, sender=sender, resolve=resolve)
    tx_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with int_pkg.Collector(cfg, listeners=[loop]) as col:
            addr = col.report_address
            # two flows; the second hop holds a growing queue at full line rate
            for k in range(6):
                for j, sport in enumerate((49152, 49153, 50000)):
                    tx_sock.sendto(report(3 * k + j, 1_000 + 20 * k, 25_000 * k, 20_000 * k,
                                          sport), addr)
                time.sleep(0.02)
            got = []
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and len({int(r["flow_id"]) for r in got}) < 2:
                got.extend(decode_feedback(agent.recv(65535)))
    finally:
        tx_sock.close()
        agent.close()
        sender.close()
    ids = {int(r["flow_id"]) for r in got}
    assert ids == {101, 102}
    assert sorted(set(resolved)) == [49152, 49153, 50000] and len(resolved) == 3
    assert all(r["rate_bps"] < 10e9 for r in got if r["rate_bps"])  # queue -> slower
    assert loop.stats.flows_started == 2 and loop.stats.flows_unresolved == 1
    st = eng.stats()
    # latencies are recorded, never negative (their size depends on the machine's load)
    assert st.telemetry_to_decision.count > 0 and st.telemetry_to_decision.max_s >= 0
    # one telemetry-to-wire sample per record sent
    assert st.telemetry_to_sent.count >= 2 and st.telemetry_to_sent.p50_s >= 0
