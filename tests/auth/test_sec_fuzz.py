"""Property-based fuzzing of the authenticated paths: random and mutated frames never
crash a receiver, are never accepted unless they are the genuine bytes, and every
datagram ends up accepted or counted under exactly one reason; the same for the
agent's feedback / confirmation decoders and the collector with keys and report
sources (the report and batch decoders themselves: tests/controller_int/test_fuzz.py)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from common.auth import KeyFile, KeyRing, Signer, Verifier
from common.auth.channel import REJECT_REASONS
from common.auth.keys import KeyFileError, parse_key_ring
from controller.int import Collector, CollectorConfig
from controller.int.synth import Hop, build_hpcc_report
from ebpf.feedback import decode_feedback_datagram, feedback_lines, parse_confirm_reply
from formats.agent_batch import AgentBatchError, decode_batch_header, encode_batch
from formats.auth import FrameError, FrameKind, decode_frame_header, encode_frame
from formats.int_md import HOST_RECORD_DTYPE
from traffic.control import parse_control

KEYS = KeyFile.from_ring(KeyRing(keys={1: b"q" * 32, 2: b"r" * 32}, sign_key_id=1,
                                 senders=frozenset({1, 2, 3})))


def _counted(v: Verifier, n: int) -> None:
    assert v.stats.accepted + v.stats.rejected_total == n
    assert set(v.stats.rejected) <= set(REJECT_REASONS)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=20))
def test_random_bytes_never_accepted(datagrams: list[bytes]) -> None:
    v = Verifier(KEYS, kinds=tuple(FrameKind))
    for d in datagrams:
        assert v.open(d) is None
    _counted(v, len(datagrams))


@settings(max_examples=400, deadline=None)
@given(payload=st.binary(max_size=200), pos=st.integers(0, 10_000), bit=st.integers(0, 7),
       cut=st.integers(0, 10_000), extra=st.binary(max_size=8))
def test_mutated_frames_rejected_genuine_accepted(payload: bytes, pos: int, bit: int, cut: int,
                                                  extra: bytes) -> None:
    s = Signer(KEYS, sender_id=2, kind=FrameKind.FEEDBACK)
    v = Verifier(KEYS, kinds=(FrameKind.FEEDBACK,))
    good = s.seal(payload)
    flipped = bytearray(good)
    flipped[pos % len(good)] ^= 1 << bit
    for bad in (bytes(flipped), good[:cut % len(good)], good + extra if extra else good[:-1]):
        assert v.open(bad) is None
    opened = v.open(good)
    assert opened is not None and opened.payload == payload
    assert v.open(good) is None   # the replay
    _counted(v, 5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2**32 - 1), st.integers(0, 2**40),
                          st.integers(1, 3)), min_size=1, max_size=60))
def test_sequences_counted(frames: list[tuple[int, int, int, int]]) -> None:
    """Arbitrary (sender, counter, epoch) orders: each frame accepted at most once."""
    v = Verifier(KEYS, kinds=(FrameKind.CONFIRM,), window=32)
    seen = set()
    for sender, counter, epoch, kid in frames:
        data = encode_frame(b"c", key=KEYS.ring().keys.get(kid, b"z" * 16), kind=3, key_id=kid,
                            sender_id=sender, counter=counter, epoch=epoch)
        got = v.open(data)
        if got is not None:
            assert (sender, counter, epoch) not in seen
            seen.add((sender, counter, epoch))
    _counted(v, len(frames))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_header_decoders_raise_only_their_errors(data: bytes) -> None:
    for fn, err in ((decode_frame_header, FrameError), (decode_batch_header, AgentBatchError)):
        try:
            fn(data)
        except err:
            pass


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_feedback_and_confirm_decoders(data: bytes) -> None:
    recs = decode_feedback_datagram(data)
    if recs is not None:
        lines, ok = feedback_lines(recs)
        assert len(lines) == int(ok.sum()) <= recs.size
    parse_confirm_reply(data)
    cmds, errs = parse_control(data)       # one command or one reason per non-empty line
    assert len(cmds) + len(errs) <= max(1, len(data.decode("utf-8", "replace").splitlines()))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_key_file_parser_raises_only_key_file_errors(text: str) -> None:
    try:
        parse_key_ring(text)
    except KeyFileError:
        pass


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2000), st.integers(0, 7)),
                min_size=1, max_size=30))
def test_collector_with_keys_counts_everything(muts: list[tuple[int, int, int]]) -> None:
    """Sealed batches, mutated or not, and reports from good or bad sources through the
    collector's whole admission path: nothing raises, everything is counted."""
    c = Collector(CollectorConfig(report_port=0, agent_port=0, keys=KEYS, hop_capacity=64,
                                  flow_capacity=64,
                                  report_sources=frozenset({("10.255.0.1", 32766)})))
    s = Signer(KEYS, sender_id=3, kind=FrameKind.HOST_BATCH)
    rec = np.zeros(3, HOST_RECORD_DTYPE)
    rec["hop_count"] = 1
    batches, reports = [], []
    for i, (how, pos, bit) in enumerate(muts):
        b = bytearray(s.seal(encode_batch(rec, agent_id=3 if how != 4 else 9, batch_seq=i)))
        if how in (1, 2):
            b[pos % len(b)] ^= 1 << bit
        batches.append(bytes(b))
        rep = build_hpcc_report(node_id=1, seq=i, hops=[Hop(node_id=1, line_rate_mbps=1)])
        reports.append((rep, ("10.255.0.1", 32766) if how != 5 else ("10.9.9.9", 32766)))
    c.feed_agent_batches(batches)
    c._feed_sourced_reports(reports)
    st_ = c.stats()
    v = c.admission.verifier
    assert v is not None
    assert v.stats.accepted + v.stats.rejected_total == len(batches)
    bad_src = sum(1 for how, _, _ in muts if how == 5)
    assert st_.rejected.get("report_source", 0) == bad_src
    assert st_.report_datagrams == len(muts) - bad_src
    assert st_.agent_datagrams == v.stats.accepted - st_.rejected.get("agent_sender_mismatch", 0)
