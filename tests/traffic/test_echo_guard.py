"""An HPCC sender takes an INT echo only when it is plausible for the QP
(``traffic.echo_guard``): each refusal by reason, alone and through a requester QP whose
rate forged echoes must not move."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import int_echo, roce
from formats.int_echo import EchoHop
from formats.int_md import MAX_HOPS
from traffic.echo_guard import ECHO_REJECT_REASONS, EchoGuard
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.qp_types import QpConfig

OK = EchoHop(node_id=1, egress_ts=1000, tx_bytes=500, queue_bytes=2000, line_rate=4)
WINDOW = {"una": 100, "next_seq": 110, "window_pkts": 16}


@pytest.mark.parametrize(("hops", "ack_seq", "why"), [
    ([OK], 105, None),
    ([OK], 110, None),                     # acknowledges everything sent
    ([OK], 84, None),                      # a late ACK, a window behind
    ([OK], 111, "psn_window"),             # beyond what the QP sent
    ([OK], 83, "psn_window"),              # more than a window behind
    ([], 105, "hop_count"),
    ([OK] * (MAX_HOPS + 1), 105, "hop_count"),
    ([OK, EchoHop(2, 1000, 500, 0xFFFFFFFF, 4)], 105, "queue_bytes"),
    ([EchoHop(2, 1000, 500, 0, 0)], 105, "line_rate"),
    ([OK, EchoHop(2, 1000, 500, 0, 0xFFFFFFFF)], 105, "line_rate"),
])
def test_each_reason(hops: list[EchoHop], ack_seq: int, why: str | None) -> None:
    g = EchoGuard()
    assert g.check(hops, ack_seq=ack_seq, **WINDOW) == why
    assert (g.accepted, g.rejected) == ((1, {}) if why is None else (0, {why: 1}))
    assert why is None or why in ECHO_REJECT_REASONS


def test_bounds_are_settings() -> None:
    g = EchoGuard(max_hops=2, max_queue_bytes=10_000, max_line_rate_mbps=100)
    assert g.check([OK] * 3, ack_seq=105, **WINDOW) == "hop_count"
    assert g.check([EchoHop(1, 1, 1, 10_001, 4)], ack_seq=105, **WINDOW) == "queue_bytes"
    assert g.check([EchoHop(1, 1, 1, 10_000, 101)], ack_seq=105, **WINDOW) == "line_rate"
    assert g.check([EchoHop(1, 1, 1, 10_000, 100)], ack_seq=105, **WINDOW) is None


def test_forged_echoes_do_not_move_the_rate(hpcc_requester, echo_ack) -> None:
    r = hpcc_requester(base_rtt_s=0.01)
    r.post_write(bytes(20 * 1024), now=0.0)
    out: list[bytes] = []
    r.poll(0.0, out)
    r.poll(0.0025, out)  # paced one packet per size / R (2.2 ms here)
    sent = len(out)
    assert sent == 2
    for p in range(2):   # genuine: idle path at the line rate, HPCC has its reference
        pkt, hops = echo_ack(p, [EchoHop(1, 1000 * (p + 1), 250 * p, 0, 4)])
        r.on_ack(pkt, 0.003 + 0.001 * p)
        r.on_int_echo(hops, pkt, 0.003 + 0.001 * p)
    rate = r.cfg.rate_bps
    forged = [([EchoHop(1, 3000, 500, 0xFFFFFF00, 4)], 1),        # a 4 GB queue
              ([EchoHop(1, 3000, 500, 0, 0)], 1),                 # no line rate
              ([], 1),                                            # no hop
              ([EchoHop(1, 3000, 500, 50_000, 4)], sent + 100)]   # an ACK of unsent data
    for hops, psn in forged:
        pkt, got = echo_ack(psn, hops)
        r.on_int_echo(got, pkt, 0.006)
    assert r.cfg.rate_bps == rate and r.cc.max_queue_bytes == 0
    assert r.echo_guard.rejected == {"queue_bytes": 1, "line_rate": 1, "hop_count": 1,
                                     "psn_window": 1}
    assert r.snapshot()["hpcc"]["echo_rejected"] == r.echo_guard.rejected
    assert r.counters.echo_acks == 6 and r.echo_guard.accepted == 2


_U32 = st.integers(0, 0xFFFFFFFF)
_HOP = st.builds(EchoHop, _U32, _U32, _U32, _U32, _U32)


@settings(max_examples=60, deadline=None)
@given(acks=st.lists(st.tuples(st.integers(0, (1 << 24) - 1), st.lists(_HOP, max_size=MAX_HOPS),
                               st.booleans()), min_size=1, max_size=30))
def test_forged_acks_through_the_endpoint(acks: list[tuple[int, list[EchoHop], bool]]) -> None:
    """Arbitrary echoes on ACKs with a correct ICRC (anyone can compute it) at any PSN,
    some with a broken trailer: nothing raises, every echo is either taken or counted,
    and the rate stays within HPCC's bounds."""
    ep = Endpoint(EndpointConfig(ip="127.0.0.1", port=0))
    try:
        req = ep.add_requester(QpConfig(qpn=0x10, peer_qpn=0x10, peer_ip="127.0.0.2",
                                        rate_bps=4e6, cc="hpcc-sender"))
        req.post_write(bytes(8 * 1024), now=0.0)
        req.poll(0.0, [])
        port = ep.cfg.port
        for psn, hops, broken in acks:
            ack = roce.build_udp_payload(src="127.0.0.2", dst="127.0.0.1", sport=50001,
                                         dport=port, opcode=roce.Opcode.ACKNOWLEDGE,
                                         dest_qp=0x10, psn=psn, aeth=(0, 1))
            wire = int_echo.append_echo(ack, hops)
            if broken:
                wire = wire[:-4] + b"\x00" + wire[-3:]
            ep._process(wire, ("127.0.0.2", 50001), 0, 0.01)
        g, hp = req.echo_guard, req.hpcc
        assert hp is not None
        assert req.counters.echo_acks == g.accepted + sum(g.rejected.values())
        assert req.counters.echo_acks + ep.counters.bad_echo == len(acks)
        assert set(g.rejected) <= set(ECHO_REJECT_REASONS)
        assert hp.min_rate_bps <= hp.rate_bps <= 4e6
    finally:
        ep.close()
