"""Fuzzing: random and mutated datagrams never crash the decoders, and every datagram
is accounted for exactly once: decoded, or counted as malformed under the reason that
applies.  The expected reasons come from an independent reading of the formats
(formats/FORMATS.md "Telemetry Report v2.0" and "Agent batch"), not from the decoders.
"""
from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.int.collector import Collector, CollectorConfig
from controller.int.decode import ReportDecoder
from controller.int.errors import Malformed
from controller.int.host import HostBatchDecoder
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import (
    AGENT_BATCH_HEADER_LEN,
    AGENT_BATCH_MAGIC,
    AGENT_BATCH_VERSION,
    encode_batch,
)
from formats.int_md import HOST_RECORD_DTYPE, MAX_HOPS
from formats.telemetry_report import FIXED_LEN, REPORT_VERSION

#: reasons decided by the datagram's framing, before any report inside is looked at
FRAMING = (Malformed.SHORT, Malformed.UNALIGNED, Malformed.BAD_VERSION, Malformed.REPORT_LENGTH)


def report_framing(d: bytes) -> tuple[Malformed | None, int]:
    """(framing reason, 0) for a datagram refused whole, else (None, reports inside).

    Group header 8 B, then individual reports of 4 B + 4 x (report length) B each; a
    datagram whose reports do not end exactly at its end is refused whole."""
    n = len(d)
    if n < FIXED_LEN:
        return Malformed.SHORT, 0
    if n % 4:
        return Malformed.UNALIGNED, 0
    if d[0] >> 4 != REPORT_VERSION:
        return Malformed.BAD_VERSION, 0
    off, count = 8, 0
    while off < n:
        if off + 4 > n or off + 4 + 4 * d[off + 1] > n:
            return Malformed.REPORT_LENGTH, 0
        off += 4 + 4 * d[off + 1]
        count += 1
    return None, count


def check_reports_accounted(dec: ReportDecoder, datagrams: list[bytes]) -> None:
    """Framing reasons as the oracle says; every report inside a framed datagram either
    decoded into one sample or counted under exactly one content reason."""
    want: Counter = Counter()
    inside = 0
    for d in datagrams:
        reason, count = report_framing(d)
        if reason is None:
            inside += count
        else:
            want[reason] += 1
    got = dec.stats.malformed
    assert {r: got[r] for r in FRAMING} == {r: want[r] for r in FRAMING}
    content = sum(v for r, v in got.items() if r not in FRAMING)
    assert dec.stats.reports + content == inside
    assert dec.stats.datagrams == len(datagrams)


def _seeds() -> list[bytes]:
    out = []
    for n in range(9):
        hops = [Hop(node_id=k, egress_port=k, queue_pkts=k, egress_ts_us=k, tx_bytes=k,
                    queue_bytes=k, line_rate_mbps=1000) for k in range(n)]
        out.append(build_hpcc_report(node_id=n, seq=n, hops=hops))
        out.append(build_hpcc_report(node_id=n, seq=n, hops=hops, sink=Hop(line_rate_mbps=1),
                                     ins_bitmap=0xFC00, ds_bitmap=0xE000))
    return out


def _mutate(rng: np.random.Generator, d: bytes) -> bytes:
    b = bytearray(d)
    kind = rng.integers(0, 5)
    if kind == 0:  # flip bytes
        for _ in range(rng.integers(1, 6)):
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
    elif kind == 1:  # truncate
        del b[rng.integers(0, len(b)):]
    elif kind == 2:  # extend with garbage
        b += rng.integers(0, 256, rng.integers(1, 64), dtype=np.uint8).tobytes()
    elif kind == 3:  # flip bits in the header area
        for _ in range(rng.integers(1, 4)):
            i = int(rng.integers(0, min(len(b), 64)))
            b[i] ^= 1 << int(rng.integers(0, 8))
    else:  # random bytes with a valid-looking version nibble
        b = bytearray(rng.integers(0, 256, rng.integers(0, 300), dtype=np.uint8).tobytes())
        if b:
            b[0] = 0x20 | (b[0] & 0x0F)
    return bytes(b)


def test_thousands_of_mutated_reports() -> None:
    rng = np.random.default_rng(1234)
    seeds = _seeds()
    dec = ReportDecoder()
    total = 0
    reasons: set[Malformed] = set()
    for _round in range(20):
        batch = [_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(500)]
        total += len(batch)
        out = dec.decode(batch, 0)
        # decoded hops always reference a decoded sample
        assert (out.hops["sample"] < max(len(out.samples), 1)).all()
        check_reports_accounted(dec, batch)
        reasons |= {r for r, v in dec.stats.malformed.items() if v}
        dec = ReportDecoder()
    assert total == 10_000
    # the mutations reach both the framing and the contents of reports
    assert len(reasons & set(FRAMING)) >= 3 and len(reasons - set(FRAMING)) >= 3, reasons


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=400), min_size=1, max_size=20))
def test_random_bytes_reports(datagrams: list[bytes]) -> None:
    dec = ReportDecoder()
    dec.decode(datagrams, 0)
    check_reports_accounted(dec, datagrams)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=2000), min_size=1, max_size=10))
def test_random_bytes_agent_batches(datagrams: list[bytes]) -> None:
    dec = HostBatchDecoder()
    dec.decode(datagrams, 0)
    check_batches_accounted(dec, datagrams)


def test_mutated_agent_batches() -> None:
    rng = np.random.default_rng(7)
    rec = np.zeros(4, HOST_RECORD_DTYPE)
    rec["hop_count"] = [1, 2, 8, 3]
    good = encode_batch(rec, agent_id=1, batch_seq=1)
    dec = HostBatchDecoder()
    sent = []
    for _ in range(2000):
        b = bytearray(good)
        for _ in range(rng.integers(1, 4)):
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
        sent.append(bytes(b))
        dec.decode([bytes(b)], 0)
    check_batches_accounted(dec, sent)


def test_collector_survives_mutations_end_to_end() -> None:
    """Mutated reports through the whole ingest path (tables, sequence accounting)."""
    rng = np.random.default_rng(99)
    seeds = _seeds()
    c = Collector(CollectorConfig(report_port=0, agent_port=0, hop_capacity=64, flow_capacity=64))
    for _ in range(10):
        c.feed_reports([_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(300)])
    s = c.stats()
    assert s.report_datagrams == 3000
    assert s.hops <= 64 and s.flows <= 64


_BATCH_HEAD = struct.Struct("!IBBHIIII")


def batch_verdict(d: bytes) -> tuple[Malformed | None, list[int]]:
    """(reason, []) for a refused batch, else (None, hop count of each record)."""
    if len(d) < AGENT_BATCH_HEADER_LEN:
        return Malformed.SHORT, []
    magic, version, _flags, size, count, _agent, _seq, _dropped = _BATCH_HEAD.unpack_from(d)
    if magic != AGENT_BATCH_MAGIC:
        return Malformed.BATCH_MAGIC, []
    if version != AGENT_BATCH_VERSION:
        return Malformed.BATCH_VERSION, []
    if size != HOST_RECORD_DTYPE.itemsize:
        return Malformed.BATCH_RECORD_SIZE, []
    if len(d) != AGENT_BATCH_HEADER_LEN + count * size:
        return Malformed.BATCH_LENGTH, []
    rec = np.frombuffer(d[AGENT_BATCH_HEADER_LEN:], HOST_RECORD_DTYPE)
    return None, [int(h) for h in rec["hop_count"]]


def check_batches_accounted(dec: HostBatchDecoder, datagrams: list[bytes]) -> None:
    """Each refused batch counted once under its reason; each record of an accepted
    batch decoded or counted as RECORD_HOP_COUNT (more hops than a record holds)."""
    want: Counter = Counter()
    records = 0
    for d in datagrams:
        reason, hops = batch_verdict(d)
        if reason is not None:
            want[reason] += 1
        for h in hops:
            if h > MAX_HOPS:
                want[Malformed.RECORD_HOP_COUNT] += 1
            else:
                records += 1
    assert dict(dec.stats.malformed) == {r: v for r, v in want.items() if v}
    assert dec.stats.records == records
    assert dec.stats.datagrams == len(datagrams)


# -- one malformation at a time: exactly one datagram counted, under its reason ----------
def _offsets(d: bytes) -> dict[str, int]:
    ip = FIXED_LEN + 4 * d[10]
    udp = ip + 4 * (d[ip] & 0x0F)
    return {"ip": ip, "shim": udp + 8, "md": udp + 12}


def _set(where: str, delta: int, value: Callable[[int], int]) -> Callable[[bytearray], None]:
    def apply(b: bytearray) -> None:
        i = (_offsets(bytes(b))[where] if where else 0) + delta
        b[i] = value(b[i]) & 0xFF
    return apply


def _truncate_inner(b: bytearray) -> None:
    """Cut the report after the UDP header of its inner packet (lengths kept consistent)."""
    keep = _offsets(bytes(b))["shim"] - 4
    del b[keep:]
    b[9] = (keep - 12) // 4


REPORT_CASES: dict[Malformed, Callable[[bytearray], None]] = {
    Malformed.SHORT: lambda b: b.__delitem__(slice(FIXED_LEN - 1, None)),
    Malformed.UNALIGNED: lambda b: b.extend(b"\0"),
    Malformed.BAD_VERSION: _set("", 0, lambda v: 0x30 | v & 0x0F),
    Malformed.REPORT_LENGTH: _set("", 9, lambda v: v + 1),
    Malformed.UNSUPPORTED_REPORT_TYPE: _set("", 8, lambda v: 0x20 | v & 0x0F),
    Malformed.UNSUPPORTED_INNER_TYPE: _set("", 8, lambda v: v & 0xF0 | 3),
    Malformed.MD_LENGTH: _set("", 10, lambda v: v + 1),
    Malformed.INNER_TRUNCATED: _truncate_inner,
    Malformed.BAD_IPV4: _set("ip", 0, lambda v: 0x65),
    Malformed.NOT_UDP: _set("ip", 9, lambda v: 6),
    Malformed.NOT_INT_MD: _set("shim", 0, lambda v: 0x20 | v & 0x0F),
    Malformed.BAD_SHIM: _set("shim", 1, lambda v: 2),
    Malformed.BAD_MD_VERSION: _set("md", 0, lambda v: 0x10 | v & 0x0F),
    Malformed.HOP_ML_MISMATCH: _set("md", 2, lambda v: v & 0xE0 | (v + 1) & 0x1F),
}


@pytest.mark.parametrize("reason", list(REPORT_CASES), ids=lambda r: r.value)
def test_each_report_malformation_is_counted_by_its_reason(reason: Malformed) -> None:
    hops = [Hop(node_id=k, egress_port=k, queue_pkts=k, egress_ts_us=k, tx_bytes=k,
                queue_bytes=k, line_rate_mbps=1000) for k in range(2)]
    good = build_hpcc_report(node_id=1, seq=1, hops=hops)
    bad = bytearray(good)
    REPORT_CASES[reason](bad)
    dec = ReportDecoder()
    dec.decode([good, bytes(bad), good], 0)
    assert dict(dec.stats.malformed) == {reason: 1}
    assert dec.stats.reports == 2 and dec.stats.datagrams == 3
    check_reports_accounted(dec, [good, bytes(bad), good])


def _batch(**change: int) -> bytes:
    rec = np.zeros(3, HOST_RECORD_DTYPE)
    rec["hop_count"] = [1, change.pop("hop_count", 2), 3]
    b = bytearray(encode_batch(rec, agent_id=1, batch_seq=1))
    for name, (fmt, at) in {"magic": ("!I", 0), "version": ("!B", 4), "record_size": ("!H", 6),
                            "count": ("!I", 8)}.items():
        if name in change:
            struct.pack_into(fmt, b, at, change[name])
    return bytes(b[:change["cut"]]) if "cut" in change else bytes(b)


BATCH_CASES = [
    (Malformed.SHORT, _batch(cut=AGENT_BATCH_HEADER_LEN - 1), 0),
    (Malformed.BATCH_MAGIC, _batch(magic=0x12345678), 0),
    (Malformed.BATCH_VERSION, _batch(version=AGENT_BATCH_VERSION + 1), 0),
    (Malformed.BATCH_RECORD_SIZE, _batch(record_size=HOST_RECORD_DTYPE.itemsize - 8), 0),
    (Malformed.BATCH_LENGTH, _batch(count=4), 0),
    (Malformed.RECORD_HOP_COUNT, _batch(hop_count=MAX_HOPS + 1), 2),
]


@pytest.mark.parametrize("reason,datagram,records", BATCH_CASES, ids=[c[0].value for c in BATCH_CASES])
def test_each_batch_malformation_is_counted_by_its_reason(reason: Malformed, datagram: bytes,
                                                          records: int) -> None:
    dec = HostBatchDecoder()
    dec.decode([datagram], 0)
    assert dict(dec.stats.malformed) == {reason: 1}
    assert dec.stats.records == records
    check_batches_accounted(dec, [datagram])
