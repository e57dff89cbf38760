"""Feedback over real UDP sockets on loopback, decoded as the host agent decodes it."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from controller.cc import FlowIndexError, decode_feedback
from controller.cc.sender import FeedbackSender


@pytest.fixture
def agents():
    socks = []
    for _ in range(2):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.bind(("127.0.0.1", 0))
        s.settimeout(2.0)
        socks.append(s)
    yield socks
    for s in socks:
        s.close()


def recv_all(s: socket.socket) -> np.ndarray:
    out = []
    s.settimeout(0.3)
    try:
        while True:
            out.append(decode_feedback(s.recv(65535)))
    except TimeoutError:
        pass
    return np.concatenate(out) if out else np.zeros(0)


def test_feedback_reaches_agents_grouped_and_suppressed(agents):
    a0, a1 = (s.getsockname() for s in agents)
    with FeedbackSender(n_flows=100, max_records=10, clock_ns=lambda: 42) as tx:
        for f in range(100):
            tx.bind_flow(f, agent=a0 if f % 2 == 0 else a1, flow_id=1000 + f)
        assert tx.send(np.arange(100), np.full(100, 5e9), fec_k=8, fec_m=1) == 100
        got0, got1 = recv_all(agents[0]), recv_all(agents[1])
        assert sorted(got0["flow_id"].tolist()) == list(range(1000, 1100, 2))
        assert sorted(got1["flow_id"].tolist()) == list(range(1001, 1100, 2))
        assert np.all(got0["rate_bps"] == 5_000_000_000) and np.all(got0["decided_ns"] == 42)
        assert tx.stats.datagrams == 10  # 50 records per agent, 10 per datagram
        # tiny change and same FEC: nothing sent; a real change for flow 3 only
        rates = np.full(100, 5e9 * 1.001)
        rates[3] = 2e9
        assert tx.send(np.arange(100), rates, fec_k=8, fec_m=1) == 1
        got = recv_all(agents[1])
        assert got["flow_id"].tolist() == [1003] and got["rate_bps"][0] == 2_000_000_000
        # FEC change alone: record with rate 0 ("unchanged")
        assert tx.send([4], [5e9], fec_k=16, fec_m=2) == 1
        got = recv_all(agents[0])
        assert got["rate_bps"].tolist() == [0] and got["fec_k"].tolist() == [16]
        assert tx.stats.suppressed == 99


def test_host_agent_decoder_agrees():
    ebpf_fb = pytest.importorskip("ebpf.feedback")
    from controller.cc import encode_feedback
    buf = encode_feedback(flow_id=[17], seq=1, decided_ns=2, rate_bps=[25e9], fec_k=[16],
                          fec_m=[2])
    lines, rejected = ebpf_fb.feedback_to_lines(ebpf_fb.decode_feedback_datagram(buf))
    assert rejected == 0
    assert lines == ['{"qp":17,"rate_bps":25000000000.0,"fec_k":16,"fec_m":2}']


def test_unbound_and_bad_flows():
    with FeedbackSender(n_flows=2) as tx:
        assert tx.send([0, 1], [1e9, 1e9]) == 0
        assert tx.stats.suppressed == 2
        with pytest.raises(FlowIndexError, match="flow 5 outside 0..1"):
            tx.bind_flow(5, agent=("127.0.0.1", 9), flow_id=1)


def test_fec_only_feedback(agents):
    a0 = agents[0].getsockname()
    with FeedbackSender(n_flows=3) as tx:
        for f in range(3):
            tx.bind_flow(f, agent=a0, flow_id=f + 1)
        assert tx.send([0], [1e9]) == 1
        recv_all(agents[0])
        # flow 0 keeps its rate, flow 1 never had one: both get FEC with rate "unchanged"
        assert tx.send_fec([0, 1, 2], [16, 8, 0], [2, 1, 0]) == 2
        got = recv_all(agents[0])
        assert sorted(got["flow_id"].tolist()) == [1, 2]
        assert got["rate_bps"].tolist() == [0, 0]
        assert tx.send_fec([0, 1], [16, 8], [2, 1]) == 0  # unchanged: nothing sent


def test_a_path_notice_goes_to_every_bound_flow_whatever_was_sent(agents):
    """After a reroute the controller sends ``FLAG_PATH_CHANGED`` alone (rate and FEC
    unchanged) to every flow bound to an agent, even one whose rate it just sent."""
    from controller.cc import FLAG_PATH_CHANGED
    a0 = agents[0].getsockname()
    with FeedbackSender(n_flows=10) as tx:
        for f in (2, 5):
            tx.bind_flow(f, agent=a0, flow_id=100 + f)
        assert tx.send([2, 5], [5e9, 5e9]) == 2
        recv_all(agents[0])
        assert tx.bound_flows().tolist() == [2, 5]
        assert tx.send_flags(tx.bound_flows(), FLAG_PATH_CHANGED) == 2
        got = recv_all(agents[0])
        assert sorted(got["flow_id"].tolist()) == [102, 105]
        assert got["flags"].tolist() == [FLAG_PATH_CHANGED] * 2
        assert got["rate_bps"].tolist() == [0, 0] and got["fec_k"].tolist() == [0, 0]
