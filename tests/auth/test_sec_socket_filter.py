"""Kernel socket filters (``common.auth.socket_filter``) on real loopback sockets:
forged datagrams are dropped in the kernel and counted by reason, genuine ones arrive;
the collector's ``rejected`` includes the kernel's drops and its overload counter
does not."""
from __future__ import annotations

import socket
import time

import pytest

from common.auth import KeyFile, KeyRing, Signer
from common.auth.socket_filter import SourceFilter
from controller.int import Collector, CollectorConfig
from formats.auth import FrameKind

pytestmark = [pytest.mark.root, pytest.mark.bpf]
pytest.importorskip("bcc", reason="bcc is not installed")
KEYS = KeyFile.from_ring(KeyRing(keys={1: b"k" * 32}, sign_key_id=1))


def _udp(addr: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((addr, 0))
    return s


def _received(s: socket.socket) -> list[tuple[bytes, str]]:
    s.settimeout(0.3)
    out = []
    try:
        while True:
            d, a = s.recvfrom(65535)
            out.append((d, a[0]))
    except TimeoutError:
        return out


def test_sources_only_the_listed_address_and_port() -> None:
    rx, genuine, same_host, other = _udp("127.0.0.1"), _udp("127.0.0.2"), _udp("127.0.0.2"), \
        _udp("127.0.0.3")
    f = SourceFilter(sources={genuine.getsockname()}, frame_kind=None)
    try:
        f.attach(rx)
        for s, tag in ((genuine, b"genuine"), (same_host, b"other port"), (other, b"other host")):
            for _ in range(3):
                s.sendto(tag, rx.getsockname())
        assert [d for d, _ in _received(rx)] == [b"genuine"] * 3
        assert f.drops() == {"report_source": 6}
    finally:
        f.close()
        for s in (rx, genuine, same_host, other):
            s.close()


def test_frames_checked_by_shape_and_sender_address() -> None:
    rx, agent, rogue = _udp("127.0.0.1"), _udp("127.0.0.2"), _udp("127.0.0.3")
    f = SourceFilter(sources={("127.0.0.2", 0)}, frame_kind=FrameKind.HOST_BATCH,
                     source_reason="unknown_source")
    try:
        f.attach(rx)
        batch = Signer(KEYS, sender_id=0x7F000002, kind=FrameKind.HOST_BATCH).seal(b"x" * 32)
        feedback = Signer(KEYS, sender_id=0x7F000002, kind=FrameKind.FEEDBACK).seal(b"x" * 32)
        dst = rx.getsockname()
        agent.sendto(batch, dst)                               # genuine
        agent.sendto(b"\0" * 64, dst)                          # unauthenticated
        agent.sendto(batch[:20], dst)                          # short
        agent.sendto(batch[:4] + b"\x09" + batch[5:], dst)     # bad_version
        agent.sendto(feedback, dst)                            # bad_kind
        rogue.sendto(batch, dst)                               # unknown_source
        assert _received(rx) == [(batch, "127.0.0.2")]
        assert f.drops() == {"unauthenticated": 1, "short": 1, "bad_version": 1,
                             "bad_kind": 1, "unknown_source": 1}
    finally:
        f.close()
        for s in (rx, agent, rogue):
            s.close()


def test_collector_counts_kernel_drops_as_rejections_not_overload() -> None:
    rogue = _udp("127.0.0.3")
    cfg = CollectorConfig(report_port=0, agent_port=0, keys=KEYS,
                          report_sources=frozenset({("127.0.0.2", 32766)}))
    with Collector(cfg) as c:
        assert c.report_address and c.agent_address
        for _ in range(200):
            rogue.sendto(b"\x20" + b"\0" * 47, c.report_address)
            rogue.sendto(b"\0" * 64, c.agent_address)
        end = time.monotonic() + 5
        while sum(c.stats().rejected.values()) < 400 and time.monotonic() < end:
            time.sleep(0.05)
        st = c.stats()
    rogue.close()
    assert st.kernel_rejected == {"report_source": 200, "agent_unauthenticated": 200}
    assert st.rejected == st.kernel_rejected      # nothing of it reached Python
    assert st.socket_drops == 0 and st.report_datagrams == 0 and st.agent_datagrams == 0
