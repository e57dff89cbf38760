"""The socket path's batch forms (receive pool, ``decode_pool``, ``open_rows``) give the
same results and the same counters as the per-datagram forms, on good, mutated and
random datagrams; both ways of filling a pool receive the same datagrams."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from common.auth import KeyFile, Signer, Verifier
from common.auth.keys import generate_key_file
from controller.int import native_reports
from controller.int.collector import Collector, CollectorConfig
from controller.int.decode import ReportDecoder
from controller.int.host import HostBatchDecoder
from controller.int.rxbatch import RxPool, native_available
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import encode_batch
from formats.auth import FrameKind
from formats.int_md import HOST_RECORD_DTYPE
from formats.telemetry_report import IndividualReport, build_report
from tests.controller_int.test_fuzz import _mutate, _seeds
from tests.helpers.waiting import wait_or_fail


def _pool_of(datagrams: list[bytes], stride: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    buf = np.zeros((len(datagrams), stride), np.uint8)
    lens = np.zeros(len(datagrams), np.uint32)
    for i, d in enumerate(datagrams):
        buf[i, :len(d)] = np.frombuffer(d, np.uint8)
        lens[i] = len(d)
    return buf, lens


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype and len(a) == len(b)
    assert a.tobytes() == b.tobytes()


def test_report_pool_decode_equals_decode() -> None:
    rng = np.random.default_rng(5)
    seeds = _seeds()
    hops = [Hop(node_id=7, egress_ts_us=9, line_rate_mbps=1)]
    coalesced = build_report(node_id=3, seq=1, reports=[
        IndividualReport(inner=build_hpcc_report(node_id=3, seq=1, hops=hops)[20:])] * 3)
    for _ in range(10):
        batch = [_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(200)]
        batch = [d for d in batch if 0 < len(d) <= 2048] + [coalesced]  # 0: no datagram
        one, many = ReportDecoder(), ReportDecoder()
        want = one.decode(batch, 5)
        got = many.decode_pool(*_pool_of(batch), 5)
        _same(got.samples, want.samples)
        _same(got.hops, want.hops)
        assert one.stats == many.stats


def test_host_pool_decode_equals_decode() -> None:
    rng = np.random.default_rng(9)
    rec = np.zeros(4, HOST_RECORD_DTYPE)
    rec["hop_count"] = [1, 2, 8, 3]
    rec["psn"] = [1, 2, 3, 4]
    batch = []
    for i in range(300):
        b = bytearray(encode_batch(rec, agent_id=1 + i % 3, batch_seq=i // 3 + (i % 7 == 0)))
        if i % 4 == 0:
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
        if i % 11 == 0:
            del b[rng.integers(0, len(b)):]
        batch.append(bytes(b))
    one, many = HostBatchDecoder(), HostBatchDecoder()
    want = one.decode(batch, 3)
    got = many.decode_pool(*_pool_of(batch, 4096), 3)
    _same(got.samples, want.samples)
    _same(got.hops, want.hops)
    assert one.stats == many.stats


def test_open_rows_equals_open(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "keys.yaml"
    generate_key_file(path, senders=[1, 2])
    keys = KeyFile(path)
    s1 = Signer(keys, sender_id=1, kind=FrameKind.HOST_BATCH)
    s2 = Signer(keys, sender_id=2, kind=FrameKind.FEEDBACK)
    rng = np.random.default_rng(3)
    frames = []
    for i in range(200):
        f = bytearray((s1 if i % 5 else s2).seal(b"x" * (i % 40)))
        if i % 6 == 0:
            f[rng.integers(0, len(f))] ^= 1 << int(rng.integers(0, 8))
        frames.append(bytes(f))
    frames += frames[:20] + [b"I", b"INTA", b"nope" * 8]   # replays and junk
    a = Verifier(keys, kinds=(FrameKind.HOST_BATCH,))
    b = Verifier(keys, kinds=(FrameKind.HOST_BATCH,))
    want = [a.open(f) is not None for f in frames]
    buf, lens = _pool_of(frames, 128)
    ok, _sender = b.open_rows(buf, lens)
    assert ok.tolist() == want
    assert a.stats == b.stats


@pytest.mark.parametrize("method", ["recvmmsg", "recvmsg_into"])
def test_pool_receives_sources_truncation_and_drops(method: str) -> None:
    if method == "recvmmsg" and not native_available():
        pytest.skip("gcc cannot build controller/int/rxbatch.c here")
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.bind(("127.0.0.1", 0))
        pool = RxPool(rx, slots=64, stride=256, method=method)
        assert pool.method == method
        sent = [bytes([i]) * (16 + i) for i in range(4)] + [b"y" * 300]
        for d in sent:
            tx.sendto(d, rx.getsockname())
        n = pool.receive()
        assert n == 5 and pool.truncated == 1
        assert [bytes(d) for d in pool.datagrams(n)] == sent[:4] + [b""]
        assert pool.addresses(n) == [tx.getsockname()] * 5
        for _ in range(400):   # far beyond a 4 KiB buffer: the kernel drops
            tx.sendto(b"z" * 200, rx.getsockname())
        got = 0
        while (k := pool.receive()) > 0:
            got += k
        tx.sendto(b"last", rx.getsockname())   # carries the drop counter
        got += pool.receive()
        assert pool.kernel_drops > 0 and got + pool.kernel_drops == 401
    finally:
        rx.close()
        tx.close()


@pytest.mark.skipif(not native_available(), reason="gcc cannot build controller/int/rxbatch.c")
def test_pool_dense_rows_spill_long_datagrams_over_udp() -> None:
    """``head``: short datagrams sit in dense rows, longer ones spill and ``rows``
    widens only the rounds that hold one; truncation is still counted; without
    ``sources`` no addresses are read."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.bind(("127.0.0.1", 0))
        pool = RxPool(rx, slots=16, stride=2048, head=64, method="recvmmsg")
        assert pool.buf.shape == (16, 64) and pool.spill is not None
        rng = np.random.default_rng(3)
        sent = [rng.integers(0, 256, n, dtype=np.uint8).tobytes()
                for n in (30, 64, 65, 700, 2048, 2100, 10)]
        for d in sent:
            tx.sendto(d, rx.getsockname())
        n = pool.receive()
        assert n == 7 and pool.truncated == 1
        assert [bytes(d) for d in pool.datagrams(n)] == sent[:5] + [b""] + sent[6:]
        assert pool.rows(n).shape == (7, 2048)
        assert pool.addresses(n) == [tx.getsockname()] * 7
        for d in sent[:2]:   # a round of short datagrams: the dense rows themselves
            tx.sendto(d, rx.getsockname())
        n = pool.receive()
        assert n == 2 and pool.rows(n).base is pool.buf
        assert [bytes(d) for d in pool.datagrams(n)] == sent[:2]
        tx.sendto(sent[3], rx.getsockname())
        n = pool.receive()
        assert pool.rows(n).shape == (1, 704)    # as wide as the longest, 64-byte steps
        quiet = RxPool(rx, slots=4, stride=2048, head=64, sources=False)
        tx.sendto(sent[0], rx.getsockname())
        assert quiet.receive() == 1 and quiet.addresses(1) == [("0.0.0.0", 0)]
        assert bytes(quiet.datagrams(1)[0]) == sent[0]
    finally:
        rx.close()
        tx.close()


@pytest.mark.parametrize("rx_method", ["auto", "recvmsg_into"])
def test_collector_long_and_malformed_reports_as_fed(rx_method: str) -> None:
    """Reports through the socket (recvmmsg: dense 512-byte rows, longer ones spilled;
    recvmsg_into: full rows) count and decode as the same datagrams fed in memory: good
    ones of every shape, padded past 512 bytes, mutated, and junk longer than a row."""
    rng = np.random.default_rng(5)
    seeds = _seeds()
    data = [seeds[i % len(seeds)] for i in range(60)]
    data += [d + rng.integers(0, 256, 600, dtype=np.uint8).tobytes() for d in seeds[:6]]
    data += [_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(60)]
    data += [b"\x20" + bytes(900), rng.integers(0, 256, 3000, dtype=np.uint8).tobytes()]
    data = [d for d in data if d]
    fed = Collector(CollectorConfig(report_port=0, agent_port=None))
    fed.feed_reports(data)
    want = fed.stats()
    with Collector(CollectorConfig(report_port=0, agent_port=None, rx_method=rx_method)) as c:
        assert c._pools["report"].method == ("recvmsg_into" if rx_method == "recvmsg_into"
                                             or not native_available() else "recvmmsg")
        dest = c.report_address
        assert dest is not None
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for d in data:
                tx.sendto(d, dest)
        finally:
            tx.close()
        wait_or_fail(lambda: c.stats().report_datagrams == len(data))
        got = c.stats()
    assert got.truncated == 0 and got.socket_drops == 0
    assert (got.reports, got.report_hop_records) == (want.reports, want.report_hop_records)
    assert got.malformed == want.malformed and sum(got.malformed.values()) > 0
    assert got.hops == want.hops and got.flows == want.flows


def test_collector_stage_costs_and_truncation_in_stats() -> None:
    cfg = CollectorConfig(report_port=0, agent_port=0, report_slot_bytes=128)
    with Collector(cfg) as c:
        reports, agents = c.report_address, c.agent_address
        assert reports is not None and agents is not None
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            rep = build_hpcc_report(node_id=1, seq=0, hops=[Hop(node_id=1)])
            assert len(rep) <= 128
            tx.sendto(rep, reports)
            tx.sendto(rep + b"\0" * 200, reports)
            tx.sendto(encode_batch(np.zeros(2, HOST_RECORD_DTYPE), agent_id=1, batch_seq=0),
                      agents)
            wait_or_fail(lambda: c.stats().reports == 1 and c.stats().host_records == 2
                         and c.stats().truncated == 1 and c.stats().rounds >= 2)
        finally:
            tx.close()
        st = c.stats()
    assert st.rounds >= 2 and set(st.stage_ns) == {"receive", "admit", "decode", "tables",
                                                   "listeners"}
    assert st.stage_ns["decode"] > 0


@pytest.mark.skipif(not native_reports.available(), reason="gcc missing: no reports.c to compare")
def test_report_pool_native_equals_numpy() -> None:
    """reports.c (shape keys, group headers, record copies) against the numpy path of
    ``decode_pool`` on the same pools: good reports of several shapes and lengths,
    mutated and truncated ones, in one pool."""
    rng = np.random.default_rng(11)
    seeds = _seeds()
    for _ in range(10):
        batch = [_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(300)]
        batch += [seeds[rng.integers(0, len(seeds))] for _ in range(300)]
        batch = [d for d in batch if 0 < len(d) <= 2048]
        pool = _pool_of(batch)
        numpy_dec, native_dec = ReportDecoder(), ReportDecoder()
        numpy_dec.native = False
        assert native_dec.native
        want = numpy_dec.decode_pool(*pool, 5)
        got = native_dec.decode_pool(*pool, 5)
        assert len(want.samples) > 100
        _same(got.samples, want.samples)
        _same(got.hops, want.hops)
        assert numpy_dec.stats == native_dec.stats
        heads, ok = native_reports.heads(*pool)
        lens = pool[1]
        want_ok = (lens >= 8) & ((pool[0][:, 0] >> 4) == 2)
        assert (ok == want_ok).all()
        assert (heads[ok] == pool[0][ok, :8].copy().view(">u4").astype(np.uint32)).all()


def test_without_gcc_reports_decode_in_numpy(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: object) -> None:
    """No cached build and no gcc: reports.c is not there, the decoder and the
    collector's sequence accounting take the numpy path and still decode."""
    from controller.int import native
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(native, "_built", {})
    monkeypatch.setattr(native.shutil, "which", lambda _name: None)
    assert not native_reports.available()
    col = Collector(CollectorConfig(report_port=0, agent_port=None))
    assert not col.report_decoder.native
    reports = [build_hpcc_report(node_id=4, seq=i, hops=[Hop(node_id=1, egress_ts_us=i)])
               for i in range(3)]
    got = col.feed_reports(reports)
    assert len(got.samples) == 3 and col.stats().switches[0].received == 3
