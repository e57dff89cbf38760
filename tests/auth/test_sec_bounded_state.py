"""A flood of forgeries under ever new sender ids and source addresses leaves the
receivers' state bounded: no replay window, log entry or counter per forged id (the
tag and the sender list are checked before anything keeps state), and where any key
holder may send, at most ``max_senders`` windows.  Genuine senders go on being taken."""
from __future__ import annotations

import logging
import random
import tracemalloc

import numpy as np

from common.auth import KeyFile, KeyRing, RejectLog, Signer, Verifier
from common.auth.channel import REJECT_REASONS
from controller.int.admission import Admission
from ebpf.agent_auth import AgentAuth
from formats.agent_batch import encode_batch
from formats.auth import CONTROLLER_SENDER_ID, FrameKind, encode_frame
from formats.int_md import HOST_RECORD_DTYPE

AGENT = 0x0A000101
KEYS = KeyFile.from_ring(KeyRing(keys={1: b"b" * 32}, sign_key_id=1,
                                 senders=frozenset({CONTROLLER_SENDER_ID, AGENT})))
ANY = KeyFile.from_ring(KeyRing(keys={1: b"b" * 32}, sign_key_id=1))
FORGER_KEY = b"f" * 32
N = 20_000


def _forgeries(rng: random.Random, kind: int, payload: bytes) -> list[bytes]:
    """Frames under ever new sender ids: a foreign key, the right key but an unknown
    sender, and keyless bytes, in turn."""
    out = []
    for i in range(N):
        sender = rng.getrandbits(32)
        key = FORGER_KEY if i % 3 == 0 else b"b" * 32
        if i % 3 == 2:
            out.append(payload)
        else:
            out.append(encode_frame(payload, key=key, kind=kind, key_id=1, sender_id=sender,
                                    counter=rng.getrandbits(32), epoch=rng.getrandbits(63)))
    return out


def _flood_and_measure(fn, frames: list[bytes]) -> int:
    """Bytes still allocated after feeding ``frames`` (the list itself excluded)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for f in frames:
            fn(f)
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


def test_verifier_keeps_no_state_for_forged_senders() -> None:
    log = RejectLog(logging.getLogger("test.bounded"), "flood")
    v = Verifier(KEYS, kinds=(FrameKind.FEEDBACK,), log=log)
    genuine = Signer(KEYS, sender_id=CONTROLLER_SENDER_ID, kind=FrameKind.FEEDBACK)
    assert v.open(genuine.seal(b"a")) is not None
    frames = _forgeries(random.Random(1), FrameKind.FEEDBACK, b"x" * 32)
    grown = _flood_and_measure(lambda f: v.open(f, ("10.254.0.9", 1)), frames)
    # with the known-sender checks a forged id never gets a window
    assert len(v._windows) == 1
    assert v.stats.rejected == {"bad_mac": 6667, "unknown_sender": 6667,
                                "unauthenticated": 6666}
    assert set(log._next) <= set(REJECT_REASONS) and set(log._since) <= set(REJECT_REASONS)
    assert grown < 64 * 1024, grown
    assert v.open(genuine.seal(b"b")) is not None and v.stats.accepted == 2


def test_any_key_holder_gets_at_most_max_senders_windows() -> None:
    v = Verifier(ANY, kinds=(FrameKind.HOST_BATCH,), max_senders=64)
    genuine = Signer(ANY, sender_id=AGENT, kind=FrameKind.HOST_BATCH)
    assert v.open(genuine.seal(b"a")) is not None
    rng = random.Random(2)
    for _ in range(5000):
        s = Signer(ANY, sender_id=rng.getrandbits(32) | 1 << 31, kind=FrameKind.HOST_BATCH)
        v.open(s.seal(b"x"))
    assert len(v._windows) == 64
    assert v.stats.rejected["too_many_senders"] == 5000 - 63
    assert v.open(genuine.seal(b"b")) is not None   # a known sender keeps its window


def test_collector_admission_counts_by_reason_only() -> None:
    a = Admission(keys=KEYS, report_sources=frozenset({("10.255.0.1", 32766)}))
    rng = random.Random(3)
    recs = np.zeros(4, HOST_RECORD_DTYPE)
    batches = _forgeries(rng, FrameKind.HOST_BATCH, encode_batch(recs, agent_id=AGENT,
                                                                 batch_seq=1))
    reports = [(b"r" * 64, (f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
                            rng.randrange(1, 65536))) for _ in range(N)]
    assert a.agent_batches(batches) == [] and a.reports(reports) == []
    assert a.rejected() == {"report_source": N, "agent_bad_mac": 6667,
                            "agent_unknown_sender": 6667, "agent_unauthenticated": 6666}
    assert a.verifier is not None and a.verifier._windows == {}


def test_agent_feedback_flood_from_many_addresses_keeps_no_state() -> None:
    auth = AgentAuth(KEYS, agent_id=AGENT)
    auth.sources = frozenset({"10.254.0.1"})
    rng = random.Random(4)
    frames = _forgeries(rng, FrameKind.FEEDBACK, b"x" * 32)
    addrs = [(f"10.254.{rng.randrange(256)}.{rng.randrange(2, 256)}", rng.randrange(65536))
             for _ in range(N)]
    it = iter(addrs)
    grown = _flood_and_measure(lambda f: auth.open_feedback(f, next(it)), frames)
    assert auth.rejected() == {"unknown_source": N} and auth.feedback._windows == {}
    assert grown < 64 * 1024, grown
    for f in frames[:3000]:   # the same flood from the controller's own address
        auth.open_feedback(f, ("10.254.0.1", 5000))
    assert set(auth.rejected()) == {"unknown_source", "bad_mac", "unknown_sender",
                                    "unauthenticated"}
    assert auth.feedback._windows == {}
