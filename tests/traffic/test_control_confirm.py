"""Confirmation of control commands: a line with ``seq`` is answered with the PSN from
which the new setting applies (the requester's next PSN), or why it was not applied."""
from __future__ import annotations

import json
import os
import socket

import pytest

from formats.roce import PSN_MASK
from traffic.control import ControlCommand, parse_control
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.qp_types import QpConfig


def test_seq_is_parsed_and_checked() -> None:
    cmds, errs = parse_control(b'{"qp": 5, "rate_bps": 1e6, "seq": 4294967295}\n'
                               b'{"qp": 5, "rate_bps": 1e6, "seq": -1}\n'
                               b'{"qp": 6, "rate_bps": 5, "seq": 12}\n'
                               b'{"qp": 7, "fec_k": 2, "fec_m": 1}')
    assert cmds == [ControlCommand(qp=5, rate_bps=1e6, seq=0xFFFFFFFF),
                    ControlCommand(qp=7, fec_k=2, fec_m=1)]
    assert "control line 2: seq=-1 outside 0..4294967295" in errs[0]
    assert errs[0].seq is None                     # no valid seq: a plain error
    assert "rate_bps=5 outside" in errs[1]
    assert (errs[1].seq, errs[1].qp) == (12, 6)    # the refusal names the record


def _client() -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(f"\0lp-test-{os.getpid()}-{os.urandom(4).hex()}")   # abstract, like the agent
    s.settimeout(5)
    return s


def test_endpoint_confirms_with_the_next_psn(tmp_path) -> None:
    ctl = str(tmp_path / "ctl.sock")
    a = Endpoint(EndpointConfig(ip="127.0.93.1", control_path=ctl))
    b = Endpoint(EndpointConfig(ip="127.0.93.2"))
    client = _client()
    try:
        start = PSN_MASK - 5                        # the PSN wraps during the transfer
        req = a.add_requester(QpConfig(qpn=9, peer_qpn=9, peer_ip="127.0.93.2", mtu=256,
                                       rate_bps=20e6), start_psn=start)
        b.add_responder(QpConfig(qpn=9, peer_qpn=9, peer_ip="127.0.93.1", mtu=256),
                        start_psn=start)
        req.post_write(b"x" * 256 * 40)
        for _ in range(200):                        # part of the message on the wire
            a.step(0.001)
            b.step(0.001)
            if req.counters.tx_data_pkts >= 12:
                break
        sent = req.counters.tx_data_pkts
        assert 12 <= sent < 40
        assert req.next_new_psn == (start + sent) & PSN_MASK
        client.sendto(b'{"qp": 9, "rate_bps": 5e6, "seq": 70}\n'
                      b'{"qp": 10, "rate_bps": 5e6, "seq": 71}\n'
                      b'{"qp": 9, "fec_k": 0, "fec_m": 0, "seq": 72}\n'
                      b'{"qp": 9, "rate_bps": 6e6}', ctl)
        a.step(0.0)
        reply = json.loads(client.recv(65536))
        by_seq = {e["seq"]: e for e in reply["confirm"]}
        assert by_seq[70] == {"seq": 70, "qp": 9, "status": "applied",
                              "psn": (start + sent) & PSN_MASK}
        assert by_seq[71]["status"] == "unknown_qp" and "QP 10 is not a requester QP" \
            in by_seq[71]["error"]
        assert by_seq[72]["status"] == "rejected" and "fec_k=0" in by_seq[72]["error"]
        assert len(reply["confirm"]) == 3           # the line without seq: no entry
        assert req.cfg.rate_bps == 6e6 and req.rate_log[-2][1] == 5e6
        # the rest of the message still arrives at the new rate
        for _ in range(5000):
            if req.idle:
                break
            a.step(0.002)
            b.step(0.002)
        assert req.idle and req.next_new_psn == (start + 40) & PSN_MASK
    finally:
        client.close()
        a.close()
        b.close()


def test_unbound_client_gets_no_reply(tmp_path) -> None:
    """Clients without an address (``send_control``) keep working: nothing is sent."""
    ctl = str(tmp_path / "ctl.sock")
    a = Endpoint(EndpointConfig(ip="127.0.93.3", control_path=ctl))
    try:
        a.add_requester(QpConfig(qpn=3, peer_qpn=3, peer_ip="127.0.93.4"))
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.sendto(b'{"qp": 3, "rate_bps": 1e6, "seq": 1}', ctl)
        a.step(0.0)
        assert a.requesters[3].cfg.rate_bps == 1e6
        assert a.counters.control_errors == 0
    finally:
        a.close()


@pytest.mark.parametrize("qp", ["*"])
def test_all_qps_confirm_one_entry_each(tmp_path, qp: str) -> None:
    ctl = str(tmp_path / "ctl.sock")
    a = Endpoint(EndpointConfig(ip="127.0.93.5", control_path=ctl))
    client = _client()
    try:
        a.add_requester(QpConfig(qpn=3, peer_qpn=3, peer_ip="127.0.93.6"), start_psn=100)
        a.add_requester(QpConfig(qpn=4, peer_qpn=4, peer_ip="127.0.93.6"), start_psn=200)
        client.sendto(json.dumps({"qp": qp, "rate_bps": 2e6, "seq": 9}).encode(), ctl)
        a.step(0.0)
        reply = json.loads(client.recv(65536))
        assert sorted((e["qp"], e["psn"]) for e in reply["confirm"]) == [(3, 100), (4, 200)]
    finally:
        client.close()
        a.close()
