"""Fuzzing: random and mutated datagrams never crash the decoders, and every
datagram is either decoded or counted as malformed."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.int.collector import Collector, CollectorConfig
from controller.int.decode import ReportDecoder
from controller.int.host import HostBatchDecoder
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import encode_batch
from formats.int_md import HOST_RECORD_DTYPE


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
    for _round in range(20):
        batch = [_mutate(rng, seeds[rng.integers(0, len(seeds))]) for _ in range(500)]
        total += len(batch)
        out = dec.decode(batch, 0)
        # decoded hops always reference a decoded sample
        assert (out.hops["sample"] < max(len(out.samples), 1)).all()
    st_ = dec.stats
    assert st_.datagrams == total
    assert st_.reports + sum(st_.malformed.values()) >= total * 0.99  # coalesced splits may add
    assert sum(st_.malformed.values()) > 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=400), min_size=1, max_size=20))
def test_random_bytes_reports(datagrams: list[bytes]) -> None:
    dec = ReportDecoder()
    dec.decode(datagrams, 0)
    assert dec.stats.datagrams == len(datagrams)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=2000), min_size=1, max_size=10))
def test_random_bytes_agent_batches(datagrams: list[bytes]) -> None:
    dec = HostBatchDecoder()
    dec.decode(datagrams, 0)


def test_mutated_agent_batches() -> None:
    rng = np.random.default_rng(7)
    rec = np.zeros(4, HOST_RECORD_DTYPE)
    rec["hop_count"] = [1, 2, 8, 3]
    good = encode_batch(rec, agent_id=1, batch_seq=1)
    dec = HostBatchDecoder()
    for _ in range(2000):
        b = bytearray(good)
        for _ in range(rng.integers(1, 4)):
            b[rng.integers(0, len(b))] = int(rng.integers(0, 256))
        dec.decode([bytes(b)], 0)
    assert dec.stats.datagrams == 2000


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
