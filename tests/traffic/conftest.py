"""Fixtures of the traffic tests: two hosts joined by a veth pair (prefix "ttr"), and an
HPCC requester QP with the ACKs (INT echoed) its tests hand it."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from common.kernel.netns import Namespace, two_hosts
from formats import int_echo, roce
from formats.int_echo import EchoHop
from traffic.cc.hpcc import HpccSettings
from traffic.qp_types import QpConfig
from traffic.requester import Requester

HPCC_QP_RATE_BPS = 4e6
"""The line rate of the ``hpcc_requester`` QPs."""


@pytest.fixture
def pair() -> Iterator[tuple[Namespace, Namespace]]:
    with two_hosts("ttr") as hs:
        yield hs


@pytest.fixture
def hpcc_requester() -> Callable[..., Requester]:
    """Makes requester QP 0x10000 (10.0.0.1 -> 10.0.0.9, 4 Mbit/s) running HPCC on
    echoed INT (``cc=hpcc-sender``) with ``HpccSettings(**kwargs)``."""
    def make(**hpcc: Any) -> Requester:
        cfg = QpConfig(qpn=0x10000, peer_qpn=0x10000, peer_ip="10.0.0.9",
                       rate_bps=HPCC_QP_RATE_BPS, cc="hpcc-sender",
                       hpcc=HpccSettings(**hpcc))
        return Requester(cfg=cfg, local_ip="10.0.0.1", sport=50000)
    return make


@pytest.fixture
def echo_ack() -> Callable[[int, list[EchoHop]], tuple[roce.RocePacket, tuple[EchoHop, ...]]]:
    """Makes what the endpoint hands an ``hpcc_requester`` QP for an ACK of ``psn``
    carrying ``hops``: the ACK (echo removed) and the hops read back from the wire."""
    def make(psn: int, hops: list[EchoHop]) -> tuple[roce.RocePacket, tuple[EchoHop, ...]]:
        wire = int_echo.append_echo(
            roce.build_udp_payload(src="10.0.0.9", dst="10.0.0.1", sport=50001,
                                   opcode=roce.Opcode.ACKNOWLEDGE, dest_qp=0x10000, psn=psn,
                                   aeth=(0, 1)), hops)
        plain, got = int_echo.split_echo(wire)
        assert got is not None
        return roce.parse_udp_payload(plain), got
    return make
