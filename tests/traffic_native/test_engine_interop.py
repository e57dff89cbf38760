"""The native engine and the Python endpoint on real sockets (loopback): same wire.

A native requester writes to a Python responder and the reverse, in every recovery
mode, with loss injected at the receiver (either engine's emulation): the sender must
recover.
ECN: a data packet that arrives CE-marked makes the native responder send a CNP with a
valid ICRC; an ACK carrying an INT echo is read (counted) by the native requester.
"""
from __future__ import annotations

import os
import secrets
import socket
import zlib

import pytest

from common.loss import LossModel, LossProcess
from formats import int_echo, roce
from tests.helpers.waiting import pump
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.errors import ConfigError
from traffic.native_endpoint import NativeEndpoint, engine_available, make_endpoint
from traffic.qp_types import QpConfig, Reliability

pytestmark = pytest.mark.skipif(not engine_available(),
                                reason="native engine not built (make -C traffic/native)")

_NET = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"  # shared machine
A, B = f"{_NET}.1", f"{_NET}.2"
QPN = 0x010001



@pytest.mark.parametrize("mode", list(Reliability))
@pytest.mark.parametrize("native_side", ["requester", "responder"])
def test_native_and_python_interoperate(mode: Reliability, native_side: str) -> None:
    model = LossModel.bursty(0.02, 3) if mode is Reliability.AUTO else LossModel.bernoulli(0.02)
    loss = LossProcess(model, seed=3)  # at the receiver, either engine
    rx_cfg = EndpointConfig(ip=B, **({"loss": loss} if loss else {}))
    if native_side == "requester":
        tx, rx = NativeEndpoint(EndpointConfig(ip=A)), Endpoint(rx_cfg)
    else:
        tx, rx = Endpoint(EndpointConfig(ip=A)), NativeEndpoint(rx_cfg)
    with tx, rx:
        q = {"mode": mode, "rate_bps": 1e9, "fec_k": 8, "fec_m": 2, "rto_min_s": 0.004,
             "path_loss": model if mode is Reliability.AUTO else None}
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=B, **q))
        got: list[bytes] = []
        resp = rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=A, **q),
                                on_message=lambda _r, _m, buf: got.append(bytes(buf)))
        msgs = [os.urandom(n) for n in (1, 1024, 1025, 100_000, 1 << 20)]
        for m in msgs:
            req.post_write(m)
        assert pump(tx, rx, done=lambda: req.idle and len(resp.messages) == len(msgs))
        tx.run(lambda: all(m.done_s is not None for m in req.messages), timeout_s=5)
        assert got == msgs
        assert [m.crc32 for m in resp.messages] == [zlib.crc32(m) for m in msgs]
        assert all(m.fct_s is not None and m.fct_s > 0 for m in req.messages)
        st_tx, st_rx = tx.stats(), rx.stats()
        assert st_rx["endpoint"]["bad_icrc"] == 0 and st_tx["endpoint"]["bad_icrc"] == 0
        if loss is not None:  # the native sender recovered what the receiver dropped
            assert st_rx["endpoint"]["injected_drops"] > 0
            snap = st_tx["requesters"][str(QPN)]
            repaired = st_rx["responders"][str(QPN)]["fec_repaired"]
            assert snap["retx_pkts"] + repaired > 0
            if mode is Reliability.FEC:  # the native sender's repair packets decode
                assert repaired > 0 and snap["repair_pkts"] > 0
            if mode is Reliability.AUTO:  # the plans coded the large messages
                assert snap["repair_pkts"] > 0 and snap["schemes"].get("fec", 0) > 0


def test_ce_marked_data_gets_a_cnp_and_int_echo_is_read() -> None:
    ep = NativeEndpoint(EndpointConfig(ip=B))
    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)   # the requester's 4791
    src = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)    # its QP send socket
    with ep, peer, src:
        peer.bind((A, 4791))
        peer.settimeout(5)
        src.setsockopt(socket.IPPROTO_IP, 10, 2)  # IP_MTU_DISCOVER = DO: ID 0, DF
        src.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, 0x03)  # CE
        src.bind((A, 0))
        ep.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=A))
        req = ep.add_requester(QpConfig(qpn=QPN + 2, peer_qpn=QPN + 3, peer_ip=A))
        data = roce.build_udp_payload(src=A, dst=B, sport=src.getsockname()[1],
                                      opcode=roce.Opcode.WRITE_ONLY, dest_qp=QPN, psn=0,
                                      reth=(0x1000, 1, 5), payload=b"hello")
        src.sendto(data, (B, 4791))
        kinds = {}
        while len(kinds) < 2:
            buf, (ip, sport) = peer.recvfrom(2048)
            assert roce.icrc_ok(buf, src=socket.inet_aton(ip), dst=socket.inet_aton(A),
                                sport=sport)
            pkt = roce.parse_udp_payload(buf)
            kinds[pkt.bth.opcode] = pkt
        assert kinds[roce.Opcode.CNP].bth.dest_qp == QPN + 1
        assert kinds[roce.Opcode.CNP].bth.becn
        assert kinds[roce.Opcode.ACKNOWLEDGE].aeth.msn == 1
        # an ACK for the requester QP with an INT echo behind its ICRC
        req.post_write(b"x" * 10)
        buf, (ip, sport) = peer.recvfrom(2048)
        ack = roce.build_udp_payload(src=A, dst=B, sport=src.getsockname()[1],
                                     opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=QPN + 2, psn=0,
                                     aeth=(roce.AethSyndrome.ACK, 1))
        ack = int_echo.append_echo(ack, [int_echo.EchoHop(7, 100, 2000, 3000, 10000)])
        src.sendto(ack, (B, 4791))
        assert ep.run(lambda: req.idle, timeout_s=5)
        assert req.counters.echo_acks == 1 and req.counters.acks_rx == 1
        assert ep.stats()["endpoint"]["bad_icrc"] == 0


def test_make_endpoint_picks_the_engine() -> None:
    with make_endpoint(EndpointConfig(ip=A), "auto") as ep:
        assert isinstance(ep, NativeEndpoint)
    with make_endpoint(EndpointConfig(ip=A, delay_s=0.01), "auto") as ep:
        assert isinstance(ep, NativeEndpoint)  # the engine emulates delay and loss too
    with make_endpoint(EndpointConfig(ip=A), "python") as ep:
        assert isinstance(ep, Endpoint)
    with pytest.raises(ConfigError, match="--engine python"):  # a clear refusal
        make_endpoint(EndpointConfig(ip=A), "native", "no-such-cc")
    with make_endpoint(EndpointConfig(ip=A), "auto", "hpcc-sender") as ep:
        assert isinstance(ep, NativeEndpoint)  # HPCC and DCQCN run in the engine


def test_receive_delay_holds_packets_for_its_time() -> None:
    """--delay in the engine: every packet is held delay_s at the receiver (FIFO)."""
    with NativeEndpoint(EndpointConfig(ip=A, delay_s=0.02)) as tx, \
            NativeEndpoint(EndpointConfig(ip=B, delay_s=0.02)) as rx:
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=B))
        resp = rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=A))
        req.post_write(b"x" * 100)
        assert pump(tx, rx, done=lambda: req.idle and len(resp.messages) == 1)
        tx.run(lambda: req.messages[0].done_s is not None, timeout_s=5)
        assert req.srtt_s is not None and req.srtt_s >= 0.04  # 2 x 20 ms, one way each
        rx.set_rx_delay(0.0)
        req.post_write(b"y" * 100)
        assert pump(tx, rx, done=lambda: req.idle and len(resp.messages) == 2)


def test_many_qps_on_one_engine_each_complete() -> None:
    """150 QPs each way on one engine pair (the loop touches only QPs with work: a wake
    heap, ready and dirty lists), paced at different rates, some with a posted message
    late: every message arrives whole and every QP goes idle."""
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, NativeEndpoint(EndpointConfig(ip=B)) as rx:
        reqs, got = [], {}
        for i in range(150):
            q = {"rate_bps": [1e7, 1e8, 1e9][i % 3], "rto_min_s": 0.05}
            reqs.append(tx.add_requester(QpConfig(qpn=QPN + 2 * i, peer_qpn=QPN + 2 * i + 1,
                                                  peer_ip=B, **q)))
            rx.add_responder(QpConfig(qpn=QPN + 2 * i + 1, peer_qpn=QPN + 2 * i, peer_ip=A, **q),
                             on_message=lambda r, _m, buf: got.setdefault(r.qpn, []).append(
                                 zlib.crc32(buf)))
        msgs = {r.qpn + 1: [os.urandom(3000 + 17 * k)] for k, r in enumerate(reqs)}
        for r in reqs[::2]:
            r.post_write(msgs[r.qpn + 1][0])
        assert pump(tx, rx, done=lambda: len(got) == 75)
        for r in reqs[1::2]:  # the rest once the engine has gone idle
            r.post_write(msgs[r.qpn + 1][0])
        assert pump(tx, rx, done=lambda: len(got) == 150 and all(r.idle for r in reqs))
        assert got == {q: [zlib.crc32(m[0])] for q, m in msgs.items()}


def test_dcqcn_and_hpcc_qps_send_on_the_threaded_engine() -> None:
    """Requesters with the engine's congestion control (DCQCN wakes for its timers
    while its pacer holds a packet back) deliver on real sockets."""
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, NativeEndpoint(EndpointConfig(ip=B)) as rx:
        got: list[int] = []
        reqs = []
        for i, cc in enumerate(("dcqcn", "hpcc-sender")):
            q = {"rate_bps": 2e8, "cc": cc}
            reqs.append(tx.add_requester(QpConfig(qpn=QPN + 2 * i, peer_qpn=QPN + 2 * i + 1,
                                                  peer_ip=B, **q)))
            rx.add_responder(QpConfig(qpn=QPN + 2 * i + 1, peer_qpn=QPN + 2 * i, peer_ip=A,
                                      **q), on_message=lambda _r, _m, buf: got.append(len(buf)))
        for r in reqs:
            r.post_write(os.urandom(1 << 20))
        assert pump(tx, rx, done=lambda: len(got) == 2 and all(r.idle for r in reqs))
        assert got == [1 << 20, 1 << 20]


def test_native_auto_plans_know_whether_what_is_posted_fills_the_round_trip() -> None:
    """Mode auto on the engine counts the posted, unacknowledged packets from the
    engine's state plus the message being planned (as the Python requester does) against
    rate x RTT: at 11 Mbit/s and a 0.5 s round trip (5.5 Mbit) two 256 KiB messages
    (4.4 Mbit on the wire) leave the link idle (window-bound: a larger repair cap for
    bursty loss), a third (6.6 Mbit) does not.  Before the QP has measured a round trip
    nothing is window-bound (the initial timeout is no RTT).

    The margins are wide on purpose: at 100 Mbit/s and 60 ms the third message's bound
    fell at a smoothed RTT of 66.5 ms, which a loaded machine measured."""
    from common.loss import LossModel as LM
    tx, rx = NativeEndpoint(EndpointConfig(ip=A)), NativeEndpoint(EndpointConfig(ip=B, delay_s=0.5))
    with tx, rx:
        q = {"mode": Reliability.AUTO, "rate_bps": 11e6, "rto_initial_s": 2.0,
             "rto_min_s": 2.0, "path_loss": LM.bursty(0.01, 30)}
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=B, **q))
        rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=A, **q))
        first = req.post_write(bytes(256 * 1024))
        assert "window-bound" not in first.extra["recovery"]["reason"]
        assert tx.run(lambda: req.counters.msgs_done == 1, timeout_s=20)
        srtt = req.srtt_s
        assert srtt is not None and 0.45 <= srtt < 0.6, srtt  # the bounds: 0.40 and 0.60 s
        msgs = [req.post_write(bytes(256 * 1024)) for _ in range(4)]
    reasons = [m.extra["recovery"]["reason"] for m in msgs]
    assert ["window-bound" in r for r in reasons] == [True, True, False, False], (srtt, reasons)
    assert msgs[0].extra["recovery"]["scheme"] == "fec"


def test_the_completion_that_wakes_a_step_is_taken_in_that_step() -> None:
    """``run`` hands every iteration to its ``on_tick`` (the runner posts the next
    message there): the completion that ended a step's wait must be taken before the
    step returns, or the next post waits a whole further wait (the 10 ms every other
    message lost at 20 ms in the recovery sweep).  Both ends native: only the
    completion (not a peer's packets on the loop's own socket) can wake the sender; the
    receiver holds the data 50 ms, so the completion comes while the step waits; the
    sender samples once at the start, then not for 30 s (its 50 ms sample timer woke
    the step before the completion on a loaded machine)."""
    tx = NativeEndpoint(EndpointConfig(ip=A, sample_interval_s=30.0))
    rx = NativeEndpoint(EndpointConfig(ip=B, delay_s=0.05))
    with tx, rx:
        q = {"mode": Reliability.SR, "rate_bps": 1e9, "rto_min_s": 1.0}
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=B, **q))
        rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=A, **q))
        tx.step(max_wait_s=0)  # the first sample is due at once: take it before posting
        req.post_write(os.urandom(4096))
        steps = 0
        while req.counters.msgs_done < 1 and steps < 50:
            tx.step(max_wait_s=30.0)  # the engine thread acks; nothing else wakes the loop
            steps += 1
        assert req.counters.msgs_done == 1 and steps == 1


def test_a_qp_used_after_its_endpoint_closed_is_refused_not_a_crash() -> None:
    """The library takes no closed engine: a requester kept past ``close`` answers
    ``idle`` and its counters from the state the endpoint left, and refuses a post or
    a rate change with a ConfigError (reading ``idle`` after close crashed the
    process)."""
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, NativeEndpoint(EndpointConfig(ip=B)) as rx:
        req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN + 1, peer_ip=B))
        rx.add_responder(QpConfig(qpn=QPN + 1, peer_qpn=QPN, peer_ip=A))
        req.post_write(os.urandom(5000))
        assert pump(tx, rx, done=lambda: req.idle)
    assert tx.closed and req.idle
    assert req.counters.msgs_done == 1
    with pytest.raises(ConfigError, match="closed"):
        req.post_write(b"x")
    with pytest.raises(ConfigError, match="closed"):
        req.set_rate(1e6, now=0.0)
