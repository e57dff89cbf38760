"""The agent confirms feedback: controller records in (UDP from another namespace),
endpoint JSON lines out, the endpoint's answers back as CONFIRM_DTYPE records to the
controller's address, with the requester's PSN and the agent's hold time."""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import numpy as np
import pytest

from formats.feedback import CONFIRM_DTYPE, FEEDBACK_DTYPE, ConfirmStatus

pytestmark = [pytest.mark.root, pytest.mark.bpf]

if os.geteuid() != 0:
    pytest.skip("needs root for namespaces and BPF", allow_module_level=True)

from common.kernel.netns import Namespace, two_hosts
from ebpf.agent import AgentConfig, HostAgent
from traffic.control import ControlServer
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.qp_types import QpConfig


@pytest.fixture(scope="module")
def hosts() -> Iterator[tuple[Namespace, Namespace]]:
    with two_hosts("lp", subnet="10.77.61.0/24") as pair:
        yield pair


def _port(ns: Namespace) -> int:
    with ns.enter():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("0.0.0.0", 0))
    p = int(s.getsockname()[1])
    s.close()
    return p


def _feedback(flow_id: list[int], seq: list[int], rate: list[int]) -> bytes:
    fb = np.zeros(len(flow_id), FEEDBACK_DTYPE)
    fb["flow_id"], fb["seq"], fb["rate_bps"] = flow_id, seq, rate
    fb["decided_ns"] = [123_456_789 + s for s in seq]
    return fb.tobytes()


def _confirmations(sock: socket.socket, n: int, pump, timeout_s: float = 5.0) -> np.ndarray:
    got: list[np.ndarray] = []
    deadline = time.monotonic() + timeout_s
    while sum(g.size for g in got) < n and time.monotonic() < deadline:
        pump()
        try:
            data = sock.recv(65535, socket.MSG_DONTWAIT)
        except BlockingIOError:
            continue
        assert len(data) % CONFIRM_DTYPE.itemsize == 0
        got.append(np.frombuffer(data, CONFIRM_DTYPE))
    return np.concatenate(got) if got else np.zeros(0, CONFIRM_DTYPE)


def test_applied_psn_is_the_requesters_next_psn(hosts, tmp_path) -> None:
    h1, h2 = hosts
    ctl_path = str(tmp_path / "h2-traffic.sock")
    fb_port = _port(h2)
    with h1.enter():
        controller = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        responder = Endpoint(EndpointConfig(ip=h1.ip))
    with h2.enter():     # the endpoint's control socket lives in the agent's namespace
        requester = Endpoint(EndpointConfig(ip=h2.ip, control_path=ctl_path))
    start = (1 << 24) - 3
    with h2.enter():     # QP sockets too
        req = requester.add_requester(QpConfig(qpn=0x31, peer_qpn=0x31, peer_ip=h1.ip,
                                               mtu=512, rate_bps=50e6), start_psn=start)
    with h1.enter():
        responder.add_responder(QpConfig(qpn=0x31, peer_qpn=0x31, peer_ip=h2.ip, mtu=512),
                                start_psn=start)
    cfg = AgentConfig(iface=h2.ifname, netns=h2.name, feedback_port=fb_port,
                      control_socket=ctl_path)
    try:
        with HostAgent(cfg) as agent:
            req.post_write(b"r" * 512 * 200)
            while req.counters.tx_data_pkts < 20:
                requester.step(0.001)
                responder.step(0.0)
            controller.sendto(_feedback([0x31, 0x32, 0], [500, 501, 502],
                                        [10_000_000, 10_000_000, 10_000_000]),
                              (h2.ip, fb_port))
            deadline = time.monotonic() + 5
            while agent.stats().feedback_datagrams < 1 and time.monotonic() < deadline:
                agent.read(timeout_s=0.05)       # forwards to the endpoint, not applied yet
            expected_psn = req.next_new_psn
            requester.step(0.0)                  # applies before it sends anything more
            assert req.cfg.rate_bps == 10e6

            def pump() -> None:
                agent.read(timeout_s=0.01)
                requester.step(0.0)
                responder.step(0.0)

            conf = _confirmations(controller, 3, pump)
            by_seq = {int(c["seq"]): c for c in conf}
            assert sorted(by_seq) == [500, 501, 502]
            ok = by_seq[500]
            assert ConfirmStatus(int(ok["status"])) is ConfirmStatus.APPLIED
            sent = req.counters.tx_data_pkts
            assert int(ok["applied_psn"]) == expected_psn
            assert 20 <= (expected_psn - start) % (1 << 24) <= sent    # past the PSN wrap
            assert int(ok["flow_id"]) == 0x31 and int(ok["decided_ns"]) == 123_457_289
            assert 0 < int(ok["hold_ns"]) < 5e9
            assert ConfirmStatus(int(by_seq[501]["status"])) is ConfirmStatus.UNKNOWN_QP
            assert ConfirmStatus(int(by_seq[502]["status"])) is ConfirmStatus.INVALID
            st = agent.stats()
            assert st.confirmations == {"APPLIED": 1, "UNKNOWN_QP": 1, "INVALID": 1}
            assert st.confirm_pending == 0 and st.feedback_forwarded == 2
    finally:
        controller.close()
        requester.close()
        responder.close()


def test_undeliverable_and_unanswered_records_are_confirmed_with_a_status(hosts, tmp_path):
    """No endpoint listening: NO_ENDPOINT at once; an endpoint that never answers (an
    old one): UNCONFIRMED after the agent's timeout.  Nothing is lost silently."""
    h1, h2 = hosts
    ctl_path = str(tmp_path / "old.sock")
    fb_port = _port(h2)
    with h1.enter():
        controller = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    cfg = AgentConfig(iface=h2.ifname, netns=h2.name, feedback_port=fb_port,
                      control_socket=ctl_path, confirm_timeout_s=0.3)
    old = None
    try:
        with HostAgent(cfg) as agent:
            controller.sendto(_feedback([7], [1], [5_000_000]), (h2.ip, fb_port))
            conf = _confirmations(controller, 1, lambda: agent.read(timeout_s=0.02))
            assert ConfirmStatus(int(conf[0]["status"])) is ConfirmStatus.NO_ENDPOINT
            old = ControlServer(ctl_path)       # reads, never answers
            controller.sendto(_feedback([7, 8], [2, 3], [5_000_000, 6_000_000]),
                              (h2.ip, fb_port))
            t0 = time.monotonic()
            conf = _confirmations(controller, 2, lambda: agent.read(timeout_s=0.02))
            assert time.monotonic() - t0 >= 0.25
            assert [ConfirmStatus(int(s)) for s in conf["status"]] == [ConfirmStatus.UNCONFIRMED] * 2
            assert sorted(conf["seq"].tolist()) == [2, 3]
            assert (conf["hold_ns"] >= 0.3e9).all() and (conf["applied_psn"] == 0).all()
            cmds = [c for batch, _e, _a in old.receive() for c in batch]
            assert [(c.qp, c.rate_bps, c.seq) for c in cmds] == [(7, 5e6, 2), (8, 6e6, 3)]
            assert agent.stats().confirmations == {"NO_ENDPOINT": 1, "UNCONFIRMED": 2}
    finally:
        if old is not None:
            old.close()
        controller.close()
