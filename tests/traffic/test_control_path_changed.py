"""The controller's "route changed" notice (``path_changed``): a QP stalled on a dead
path drops its backed-off timeout and resends at once; a QP that is not stalled only
has its timer rearmed.  Parsed from the control socket, applied by both endpoints."""
from __future__ import annotations

import json
import os
import socket

import numpy as np
import pytest

from ebpf.feedback import feedback_lines
from formats.feedback import FEEDBACK_DTYPE, FLAG_PATH_CHANGED
from traffic.control import ControlCommand, parse_control
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.native_endpoint import NativeEndpoint, engine_available
from traffic.qp_types import QpConfig
from traffic.requester import Requester


def test_path_changed_is_parsed_and_checked() -> None:
    cmds, errs = parse_control(b'{"qp": 5, "path_changed": true, "seq": 3}\n'
                               b'{"qp": "*", "path_changed": true}\n'
                               b'{"qp": 5, "path_changed": 1}\n'
                               b'{"qp": 5, "path_changed": false}')
    assert cmds == [ControlCommand(qp=5, path_changed=True, seq=3),
                    ControlCommand(qp=None, path_changed=True)]
    assert "path_changed=1 is not true or false" in errs[0]
    assert "nothing to set" in errs[1]


def test_the_agent_forwards_a_flag_only_record() -> None:
    rec = np.zeros(2, FEEDBACK_DTYPE)
    rec["flow_id"], rec["seq"], rec["flags"] = (7, 8), (1, 2), (FLAG_PATH_CHANGED, 0)
    lines, ok = feedback_lines(rec)
    assert ok.tolist() == [True, False]           # a record with nothing in it is refused
    assert [json.loads(x) for x in lines] == [{"qp": 7, "path_changed": True, "seq": 1}]


def _stalled(mode: str) -> tuple[Requester, float]:
    """A QP whose every packet is lost (nothing delivered): after three timeouts its
    timer has backed off 8x."""
    req = Requester(cfg=QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", mode=mode, rate_bps=1e9,
                                 mtu=1024), local_ip="10.0.0.1", sport=1000)
    req.post_write(b"x" * 1024 * 8)
    now, out = 0.0, []
    req.poll(now, out)
    assert len(out) == 8
    base = req.snapshot()["rto_s"]
    for _ in range(3):
        now = req.poll(now, out := [])
        req.poll(now, out)
        assert out                                # the timeout resent
    assert req.snapshot()["rto_s"] == pytest.approx(8 * base)
    return req, base


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_a_stalled_qp_resends_at_once_and_unbacks_its_timer(mode: str) -> None:
    req, base = _stalled(mode)
    now = 0.4
    out: list[bytes] = []
    req.poll(now, out)
    assert not out                                # still waiting out its backed-off timeout
    assert req.path_changed(now) is True
    req.poll(now, out)
    # go-back-N resends the window from the oldest; selective repeat the oldest
    assert len(out) == (8 if mode == "gbn" else 1)
    assert req.snapshot()["rto_s"] == pytest.approx(base)
    assert req.poll(now, []) == pytest.approx(now + base)   # the next timeout at the base
    assert (req.path_notices, req.path_resends) == (1, 1)


def test_a_qp_that_is_not_stalled_keeps_its_packets_in_flight() -> None:
    req = Requester(cfg=QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", mode="gbn", rate_bps=1e9,
                                 mtu=1024), local_ip="10.0.0.1", sport=1000)
    req.post_write(b"x" * 1024 * 4)
    req.poll(0.0, out := [])
    assert len(out) == 4
    assert req.path_changed(0.01) is False
    req.poll(0.01, out := [])
    assert not out and (req.path_notices, req.path_resends) == (1, 0)


def _client() -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind(f"\0pc-test-{os.getpid()}-{os.urandom(4).hex()}")   # abstract, like the agent
    s.settimeout(5)
    return s


ENGINES = ["python", pytest.param("native", marks=pytest.mark.skipif(
    not engine_available(), reason="native library not built (make -C traffic/native)"))]


@pytest.mark.parametrize("engine", ENGINES)
def test_the_control_socket_notice_reaches_a_stalled_qp(tmp_path, engine: str) -> None:
    """A real endpoint sending to an address nobody answers (a dead path): its QP
    backs off; the notice on its control socket makes it resend at once and the
    confirmation says applied."""
    ctl = str(tmp_path / "ctl.sock")
    cfg = EndpointConfig(ip="127.0.94.1", control_path=ctl)
    ep = Endpoint(cfg) if engine == "python" else NativeEndpoint(cfg)
    client = _client()
    try:
        req = ep.add_requester(QpConfig(qpn=9, peer_qpn=9, peer_ip="127.0.94.2", mode="gbn", mtu=256,
                                        rate_bps=20e6, rto_min_s=0.01, rto_initial_s=0.01))
        req.post_write(b"x" * 256 * 4)
        for _ in range(2000):                     # until its timer backed off twice
            ep.step(0.005)
            if req.counters.timeouts >= 3:
                break
        assert req.counters.timeouts >= 3
        client.sendto(b'{"qp": 9, "path_changed": true, "seq": 41}', ctl)
        reply = None
        for _ in range(100):
            ep.step(0.002)
            try:
                client.settimeout(0.01)
                reply = json.loads(client.recv(65536))
                break
            except TimeoutError:
                continue
        assert reply is not None and reply["confirm"][0]["seq"] == 41
        assert reply["confirm"][0]["status"] == "applied"
        assert (req.path_notices, req.path_resends) == (1, 1)   # it was stalled: resent
    finally:
        client.close()
        ep.close()

