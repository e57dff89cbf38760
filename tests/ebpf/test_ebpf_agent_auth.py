"""The agent with a key file, in real namespaces with the real sink: batches reach the
controller's collector sealed, only the controller's sealed feedback is relayed,
forged / replayed feedback is counted by reason (the keyless
and the wrongly addressed ones already in the kernel's socket filter) and never reaches the endpoint, the
confirmations are sealed, and a restarted agent is not taken for a replay."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from common.auth import KeyFile, KeyRing, Signer, Verifier
from ebpf.agent import AgentConfig, HostAgent
from ebpf.sink import SinkConfig
from formats import int_md, roce
from formats.auth import CONTROLLER_SENDER_ID, FrameKind
from formats.feedback import CONFIRM_DTYPE, FEEDBACK_DTYPE, ConfirmStatus
from formats.int_md import HopRecord

pytestmark = [pytest.mark.root, pytest.mark.bpf]

AGENT = 0x0A4D0502
KEYS = KeyFile.from_ring(KeyRing(keys={3: b"s" * 32}, sign_key_id=3,
                                 senders=frozenset({CONTROLLER_SENDER_ID, AGENT})))


def _frames(pair, n: int) -> list[bytes]:
    return [int_md.insert_int(roce.build_frame(
        eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip, dst=pair.h2.ip, sport=48000,
        opcode=roce.Opcode.SEND_ONLY, dest_qp=0x650, psn=i),
        [HopRecord(node_id=10, egress_ts=i, tx_bytes=i, queue_bytes=1, line_rate=10_000)])
        for i in range(n)]


def _feedback(qp: int, rate: int, seq: int) -> bytes:
    fb = np.zeros(1, FEEDBACK_DTYPE)
    fb["flow_id"], fb["rate_bps"], fb["seq"] = qp, rate, seq
    return fb.tobytes()


def test_sealed_agent_end_to_end(pair):
    coll = pytest.importorskip("controller.int.collector")
    with pair.h2.enter():
        collector = coll.Collector(coll.CollectorConfig(report_port=0, agent_port=0,
                                                        keys=KEYS)).start()
        ctl = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        ctl.bind(("127.0.0.1", 0))
        ctl.settimeout(0.05)
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        fb_port = probe.getsockname()[1]
        probe.close()
    signer = Signer(KEYS, sender_id=CONTROLLER_SENDER_ID, kind=FrameKind.FEEDBACK)
    confirms = Verifier(KEYS, kinds=(FrameKind.CONFIRM,))
    cfg = AgentConfig(iface=pair.h2.ifname, netns=pair.h2.name, keys=KEYS,
                      controller=collector.agent_address, agent_id=AGENT,
                      feedback_port=fb_port, feedback_bind="127.0.0.1",
                      sink=SinkConfig(run_packets=1))  # a record per packet

    def confirmations(agent: HostAgent, want: int) -> list[np.ndarray]:
        out: list[np.ndarray] = []
        deadline = time.monotonic() + 5
        while len(out) < want and time.monotonic() < deadline:
            agent.read(timeout_s=0.02)
            try:
                data = ctl.recv(65535)
            except TimeoutError:
                continue
            opened = confirms.open(data)
            assert opened is not None, confirms.stats.rejected
            out.append(np.frombuffer(opened.payload, CONFIRM_DTYPE))
        return out

    try:
        n = 300
        for run in range(2):       # the second run is a restarted agent (new epoch)
            with HostAgent(cfg) as agent:
                pair.send(_frames(pair, n))
                deadline = time.monotonic() + 10
                while collector.stats().host_records < n * (run + 1) and \
                        time.monotonic() < deadline:
                    agent.read(timeout_s=0.1)
                good = signer.seal(_feedback(0x650, 5_000_000, 10 + run))
                ctl.sendto(good, ("127.0.0.1", fb_port))
                assert len(confirmations(agent, 1)) == 1       # NO_ENDPOINT, but sealed
                ctl.sendto(good, ("127.0.0.1", fb_port))                  # replay
                ctl.sendto(_feedback(0x650, 1000, 99), ("127.0.0.1", fb_port))  # keyless
                forged = Signer(KeyFile.from_ring(KeyRing(keys={3: b"f" * 32}, sign_key_id=3)),
                                sender_id=CONTROLLER_SENDER_ID, kind=FrameKind.FEEDBACK)
                ctl.sendto(forged.seal(_feedback(0x650, 1000, 98)), ("127.0.0.1", fb_port))
                ctl.sendto(Signer(KEYS, sender_id=AGENT, kind=FrameKind.FEEDBACK).seal(
                    _feedback(0x650, 1000, 97)), ("127.0.0.1", fb_port))  # not the controller
                with pair.h2.enter():   # a well-sealed frame from another address
                    rogue = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                    rogue.bind(("127.0.0.9", 0))
                rogue.sendto(signer.seal(_feedback(0x650, 1000, 96)), ("127.0.0.1", fb_port))
                rogue.close()
                assert confirmations(agent, 1) == []
                st = agent.stats()
                assert st.auth_rejected == {"replay": 1, "unauthenticated": 1, "bad_mac": 1,
                                            "unknown_sender": 1, "unknown_source": 1}
                # the keyless datagram and the other address never reached Python
                assert agent._auth is not None and agent._auth.kernel_filter is not None
                assert agent._auth.kernel_filter.drops() == {"unauthenticated": 1,
                                                             "unknown_source": 1}
                assert st.feedback_undelivered == 1 and st.confirmations == {"NO_ENDPOINT": 1}
        cs = collector.stats()
        assert cs.host_records == 2 * n and cs.rejected == {}
        assert cs.agents[0].agent_id == AGENT and cs.malformed == {}
    finally:
        collector.stop()
        ctl.close()


def test_standby_controller_feedback_applied_unlisted_refused(pair, tmp_path):
    """``feedback_from``: a standby controller (own sender id, own address) has its
    feedback applied by the traffic endpoint and confirmed to it, interleaved with the
    primary's; the same sealed frames from an unlisted address are dropped in the
    kernel's filter, counted, and change no rate."""
    from traffic.endpoint import Endpoint, EndpointConfig
    from traffic.qp_types import QpConfig

    standby_id = CONTROLLER_SENDER_ID - 1
    keys = KeyFile.from_ring(KeyRing(keys={3: b"s" * 32}, sign_key_id=3, senders=frozenset(
        {CONTROLLER_SENDER_ID, standby_id, AGENT})))
    ctl_path = str(tmp_path / "h2-traffic.sock")
    with pair.h2.enter():
        socks = {}
        for name, addr in (("primary", "127.0.0.1"), ("standby", "127.0.0.2"),
                           ("unlisted", "127.0.0.3"), ("port", "127.0.0.1")):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((addr, 0))
            s.settimeout(0.05)
            socks[name] = s
        probe = socks.pop("port")
        fb_port = probe.getsockname()[1]
        probe.close()
        endpoint = Endpoint(EndpointConfig(ip=pair.h2.ip, port=14791,  # 4791: pair.udp_rx
                                           control_path=ctl_path))
        req = endpoint.add_requester(QpConfig(qpn=0x650, peer_qpn=0x650, peer_ip=pair.h1.ip,
                                              rate_bps=50e6))
    cfg = AgentConfig(iface=pair.h2.ifname, netns=pair.h2.name, keys=keys,
                      controller=socks["primary"].getsockname(), agent_id=AGENT,
                      feedback_port=fb_port, feedback_bind="127.0.0.1",
                      feedback_from=("127.0.0.2",), control_socket=ctl_path)
    primary = Signer(keys, sender_id=CONTROLLER_SENDER_ID, kind=FrameKind.FEEDBACK)
    standby = Signer(keys, sender_id=standby_id, kind=FrameKind.FEEDBACK)
    confirms = Verifier(keys, kinds=(FrameKind.CONFIRM,))

    def confirmed(agent: HostAgent, sock: socket.socket) -> list[tuple[int, str]]:
        got: list[tuple[int, str]] = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            agent.read(timeout_s=0.02)
            endpoint.step(0.0)
            try:
                data = sock.recv(65535)
            except TimeoutError:
                if got:
                    return got
                continue
            opened = confirms.open(data)
            assert opened is not None, confirms.stats.rejected
            got += [(int(r["seq"]), ConfirmStatus(int(r["status"])).name)
                    for r in np.frombuffer(opened.payload, CONFIRM_DTYPE)]
        return got

    try:
        with HostAgent(cfg) as agent:
            dst = ("127.0.0.1", fb_port)
            for who, seq, rate in (("standby", 1, 5_000_000), ("primary", 2, 6_000_000),
                                   ("standby", 3, 7_000_000)):
                signer = standby if who == "standby" else primary
                socks[who].sendto(signer.seal(_feedback(0x650, rate, seq)), dst)
                assert confirmed(agent, socks[who]) == [(seq, "APPLIED")]
                assert req.cfg.rate_bps == rate
            socks["unlisted"].sendto(standby.seal(_feedback(0x650, 1000, 4)), dst)
            socks["unlisted"].sendto(primary.seal(_feedback(0x650, 1000, 5)), dst)
            assert confirmed(agent, socks["unlisted"]) == []
            assert req.cfg.rate_bps == 7_000_000
            st = agent.stats()
            assert st.auth_rejected == {"unknown_source": 2}
            assert agent._auth is not None and agent._auth.kernel_filter is not None
            assert agent._auth.kernel_filter.drops() == {"unknown_source": 2}
            assert st.feedback_datagrams == 3 and st.confirmations == {"APPLIED": 3}
    finally:
        endpoint.close()
        for s in socks.values():
            s.close()
