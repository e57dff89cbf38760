"""The HPCC loop with confirmations over real UDP sockets: reports decoded by the
collector, feedback to an agent socket, confirmations back; loop latency up to
"rate applied" and commits held until telemetry at the applied PSN arrives."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from controller.cc import FeedbackSender, HpccEngine, HpccParams, decode_feedback
from controller.cc.loop import FeedbackTarget, HpccLoop
from formats.feedback import CONFIRM_DTYPE, ConfirmStatus

int_pkg = pytest.importorskip("controller.int")
synth = pytest.importorskip("controller.int.synth")

QP = 0x44


def _report(i: int, psn: int) -> bytes:
    """Hop 2 of 2 at line rate with a 40 KB queue: every sample says "slow down"."""
    ts = 1_000 + i
    tx = i * 1250
    hops = [synth.Hop(node_id=1, egress_ts_us=ts, tx_bytes=tx, queue_bytes=0,
                      line_rate_mbps=10_000),
            synth.Hop(node_id=2, egress_ts_us=ts, tx_bytes=tx, queue_bytes=40_000,
                      line_rate_mbps=10_000)]
    return synth.build_hpcc_report(node_id=9, seq=i, hops=hops, sport=49152, dest_qp=QP,
                                   psn=psn)


def _confirm(agent: socket.socket, fb: np.ndarray, to: tuple[str, int], psn: int,
             status: ConfirmStatus = ConfirmStatus.APPLIED, hold_ns: int = 2_000_000) -> None:
    c = np.zeros(fb.size, CONFIRM_DTYPE)
    for name in ("flow_id", "seq", "decided_ns"):
        c[name] = fb[name]
    c["hold_ns"], c["applied_psn"], c["status"] = hold_ns, psn, int(status)
    agent.sendto(c.tobytes(), to)


def _wait_readable(sock: socket.socket) -> None:
    import select
    assert select.select([sock], [], [], 5)[0], "no confirmation arrived"


def test_confirmations_give_latency_and_gate_the_commit() -> None:
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(5)
    eng = HpccEngine(n_flows=16, params=HpccParams(base_rtt_s=20e-6))
    sender = FeedbackSender(n_flows=16, min_change_fraction=0.0)
    loop = HpccLoop(engine=eng, sender=sender,
                    resolve=lambda s: FeedbackTarget(agent=agent.getsockname(), flow_id=QP,
                                                     max_rate_bps=10e9))
    col = int_pkg.Collector(int_pkg.CollectorConfig(report_port=0, agent_port=None,
                                                    flow_capacity=16), listeners=[loop])
    try:
        t0 = time.monotonic_ns()
        col.feed_reports([_report(i, 100 + i) for i in range(40)], arrival_ns=t0)
        fb = decode_feedback(agent.recv(65535))
        assert fb["flow_id"].tolist() == [QP] and loop.stats.records_sent == 1
        # before any confirmation the flow is not gated: the agent may be an old one
        assert not loop.gate.armed.any() and eng.stats().decision_to_applied.count == 0
        _confirm(agent, fb, sender.sock.getsockname(), psn=140)
        _wait_readable(sender.sock)
        assert loop.poll_confirmations() == 1
        st = eng.stats()
        assert st.decision_to_applied.count == 1 and st.telemetry_to_applied.count == 1
        # sent -> applied ~ (round trip - 2 ms hold) / 2 + 2 ms: at least the hold
        assert 2e-3 <= st.decision_to_applied.max_s < 2e-3 + 1.0
        assert st.telemetry_to_applied.max_s >= st.decision_to_applied.max_s
        assert sender.stats.confirmations == {"APPLIED": 1}
        # the next commit (20 us later) is sent and now waits for its confirmation
        rc0 = eng.state.rc_bps.copy()
        col.feed_reports([_report(i, 100 + i) for i in range(40, 60)], arrival_ns=t0 + 50_000)
        fb = decode_feedback(agent.recv(65535))
        slot = int(np.flatnonzero(eng.state.active)[0])
        assert eng.state.rc_bps[slot] < rc0[slot] and loop.gate.armed[slot]
        rc1 = eng.state.rc_bps[slot]
        # stale reports (PSN before 170) keep arriving, T after T: rate moves, Rc stays
        for b in range(3):
            col.feed_reports([_report(60 + 10 * b + i, 160 + i) for i in range(10)],
                             arrival_ns=t0 + 100_000 + b * 50_000)
            if b == 0:
                _confirm(agent, fb, sender.sock.getsockname(), psn=170)
                _wait_readable(sender.sock)
                loop.poll_confirmations()
        assert eng.state.rc_bps[slot] == rc1 and loop.gate.stats.held == 3
        # the first sample at PSN 170 commits
        col.feed_reports([_report(90 + i, 168 + i) for i in range(4)],
                         arrival_ns=t0 + 300_000)
        assert eng.state.rc_bps[slot] < rc1
        assert loop.gate.stats.released_fresh == 1
        assert loop.stats.confirmations == loop.stats.confirmations_applied == 2
    finally:
        col.stop()
        sender.close()
        agent.close()


def test_unmatched_and_malformed_confirmations_are_counted() -> None:
    sender = FeedbackSender(n_flows=4)
    sender.sock.bind(("127.0.0.1", 0))      # normally bound by the first feedback sent
    junk = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        c = np.zeros(1, CONFIRM_DTYPE)
        c["seq"] = 77                        # never sent
        junk.sendto(c.tobytes(), sender.sock.getsockname())
        junk.sendto(b"xyz", sender.sock.getsockname())
        _wait_readable(sender.sock)
        time.sleep(0.05)
        assert len(sender.receive_confirmations()) == 0
        assert sender.stats.confirm_unmatched == 1 and sender.stats.confirm_malformed == 1
    finally:
        junk.close()
        sender.close()


def test_collector_thread_wakes_on_confirmations() -> None:
    """The running collector watches the feedback socket (``Collector.add_reader``):
    confirmations are handled on its thread with no polling by the caller."""
    agent = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    agent.bind(("127.0.0.1", 0))
    agent.settimeout(5)
    eng = HpccEngine(n_flows=16, params=HpccParams(base_rtt_s=20e-6))
    sender = FeedbackSender(n_flows=16)
    loop = HpccLoop(engine=eng, sender=sender,
                    resolve=lambda s: FeedbackTarget(agent=agent.getsockname(), flow_id=QP,
                                                     max_rate_bps=10e9))
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        with int_pkg.Collector(int_pkg.CollectorConfig(report_port=0, agent_port=None,
                                                       flow_capacity=16),
                               listeners=[loop]) as col:
            col.add_reader(sender.sock, loop.poll_confirmations)   # after start, too
            for i in range(30):
                tx.sendto(_report(i, i), col.report_address)
            data, _ = agent.recvfrom(65535)
            fb = decode_feedback(data)
            _confirm(agent, fb, sender.sock.getsockname(), psn=31)
            deadline = time.monotonic() + 5
            while loop.stats.confirmations < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert loop.stats.confirmations == 1
            assert eng.stats().decision_to_applied.count == 1
    finally:
        tx.close()
        sender.close()
        agent.close()
