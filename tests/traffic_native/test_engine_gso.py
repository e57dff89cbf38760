"""UDP segmentation offload in the engine (``TN_ENGINE_GSO``), on real sockets.

With it a QP's same-size frames leave in one send and a GSO engine reads them back
coalesced; the frames are still separate RoCEv2 packets: a Python responder (no
``UDP_GRO`` on its socket, so the kernel splits them) checks each one's ICRC.  Every
message arrives whole, with loss injected per frame at the receiver too; the engine
counts what it coalesced; a bad value of the knob is refused by name.
"""
from __future__ import annotations

import os
import secrets
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.loss import LossModel, LossProcess
from tests.helpers.waiting import pump
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.errors import ConfigError
from traffic.native.engine_env import check_engine_env
from traffic.native_endpoint import NativeEndpoint, engine_available
from traffic.qp_types import QpConfig, Reliability

pytestmark = pytest.mark.skipif(not engine_available(),
                                reason="native engine not built (make -C traffic/native)")

ROOT = Path(__file__).resolve().parents[2]
_NET = f"127.{secrets.randbelow(200) + 20}.{secrets.randbelow(250) + 1}"  # shared machine
A, B = f"{_NET}.1", f"{_NET}.2"
QPN = 0x020001
SIZES = (1, 1024, 1025, 100_000, 1 << 20, 3 << 20)


@pytest.fixture
def gso(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TN_ENGINE_GSO", "1")  # read by each engine as it is created
    yield



def _transfer(tx, rx, mode: Reliability) -> tuple[list[bytes], list[bytes]]:
    q = {"mode": mode, "rate_bps": 400e9, "fec_k": 8, "fec_m": 2, "rto_min_s": 0.004,
         "window_pkts": 1024}
    req = tx.add_requester(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=B, **q))
    got: list[bytes] = []
    resp = rx.add_responder(QpConfig(qpn=QPN, peer_qpn=QPN, peer_ip=A, **q),
                            on_message=lambda _r, _m, buf: got.append(bytes(buf)))
    msgs = [os.urandom(n) for n in SIZES]
    for m in msgs:
        req.post_write(m)
    assert pump(tx, rx, done=lambda: req.idle and len(resp.messages) == len(msgs))
    assert [m.crc32 for m in resp.messages] == [zlib.crc32(m) for m in msgs]
    return got, msgs


@pytest.mark.parametrize("mode", [Reliability.SR, Reliability.FEC])
def test_gso_engines_move_every_message_intact_in_coalesced_runs(gso: None,
                                                                 mode: Reliability) -> None:
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, NativeEndpoint(EndpointConfig(ip=B)) as rx:
        got, msgs = _transfer(tx, rx, mode)
        st_tx, st_rx = tx.stats(), rx.stats()
    assert got == msgs
    etx, erx = st_tx["engine"], st_rx["engine"]
    assert etx["gso_sends"] > 0 and etx["gso_pkts"] > 2 * etx["gso_sends"]
    assert erx["gro_reads"] > 0 and erx["gro_pkts"] > 2 * erx["gro_reads"]
    assert erx["bad_icrc"] == 0 and erx["truncated"] == 0 and etx["send_errors"] == 0
    # every frame counted as a packet once, coalesced or not
    assert erx["rx_pkts"] >= st_tx["requesters"][str(QPN)]["tx_data_pkts"]


def test_loss_at_a_gro_receiver_drops_single_frames_and_is_recovered(gso: None) -> None:
    loss = LossProcess(LossModel.bernoulli(0.02), seed=5)
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, \
            NativeEndpoint(EndpointConfig(ip=B, loss=loss)) as rx:
        got, msgs = _transfer(tx, rx, Reliability.SR)
        st_tx, st_rx = tx.stats(), rx.stats()
    assert got == msgs
    snap = st_tx["requesters"][str(QPN)]
    drops = st_rx["endpoint"]["injected_drops"]
    assert drops > 0 and snap["retx_pkts"] >= drops  # every dropped frame was resent
    assert st_rx["engine"]["gro_reads"] > 0


def test_a_gso_sender_reaches_a_python_responder_frame_by_frame(gso: None) -> None:
    """The Python endpoint's socket has no UDP_GRO: the kernel splits each run into its
    datagrams, and the responder verifies every one's ICRC (the UDP checksum GSO needs is
    masked by the ICRC)."""
    with NativeEndpoint(EndpointConfig(ip=A)) as tx, Endpoint(EndpointConfig(ip=B)) as rx:
        got, msgs = _transfer(tx, rx, Reliability.SR)
        st_tx, st_rx = tx.stats(), rx.stats()
    assert got == msgs
    assert st_tx["engine"]["gso_sends"] > 0
    assert st_rx["endpoint"]["bad_icrc"] == 0
    assert st_rx["endpoint"]["rx_pkts"] >= st_tx["requesters"][str(QPN)]["tx_data_pkts"]


def test_the_knob_takes_0_or_1_and_is_refused_by_name_otherwise() -> None:
    check_engine_env({"TN_ENGINE_GSO": "1"})
    check_engine_env({"TN_ENGINE_GSO": "0"})
    with pytest.raises(ConfigError, match=r"TN_ENGINE_GSO='yes' is not valid; it takes 0"):
        check_engine_env({"TN_ENGINE_GSO": "yes"})


@pytest.mark.parametrize("offload", ["0", "1"])
def test_an_empty_or_short_datagram_is_counted_as_truncated(monkeypatch: pytest.MonkeyPatch,
                                                           offload: str) -> None:
    """Bad input at the engine's port is a counted rejection with or without the
    offload's split of coalesced reads (an empty datagram is a frame of its own)."""
    import socket
    monkeypatch.setenv("TN_ENGINE_GSO", offload)
    with NativeEndpoint(EndpointConfig(ip=B)) as rx, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((A, 0))
        for junk in (b"", b"\x04" * 5):
            s.sendto(junk, (B, 4791))
        assert pump(rx, done=lambda: rx.stats()["engine"]["truncated"] >= 2, timeout_s=5)
        assert rx.stats()["engine"]["rx_pkts"] == 2
