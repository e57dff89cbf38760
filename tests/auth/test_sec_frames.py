"""formats.auth framing against fixed bytes, and every rejection reason of common.auth.Verifier."""
from __future__ import annotations

import hashlib
import hmac
import logging
import os
import stat

import pytest

from common.auth import KeyFile, KeyFileError, KeyRing, RejectLog, ReplayWindow, Signer, Verifier
from common.auth.keys import generate_key_file, load_key_ring, write_key_file
from formats.auth import (
    AUTH_HEADER_LEN,
    AUTH_OVERHEAD,
    FrameKind,
    decode_frame_header,
    encode_frame,
)

KEY = bytes(range(16))
# magic "INTA", version 1, kind 2, key id 0x0102, sender 10.0.0.2, counter 7,
# epoch 0x0005F5E100000000, payload 01..08, then the 16-byte tag
FRAME = bytes.fromhex(
    "494e5441" "01" "02" "0102" "0a000002" "00000007" "0005f5e100000000"
    "0102030405060708"
    "78e35bf97af4d92a5d512a96a66adf7d")


def test_frame_bytes_are_fixed() -> None:
    out = encode_frame(bytes.fromhex("0102030405060708"), key=KEY, kind=2, key_id=0x0102,
                       sender_id=0x0A000002, counter=7, epoch=0x0005F5E100000000)
    assert out == FRAME
    # the tag is plain HMAC-SHA256 over header + payload, first 16 bytes
    assert FRAME[-16:] == hmac.new(KEY, FRAME[:-16], hashlib.sha256).digest()[:16]
    h = decode_frame_header(FRAME)
    assert (h.kind, h.key_id, h.sender_id, h.counter, h.epoch) == (
        2, 0x0102, 0x0A000002, 7, 0x0005F5E100000000)
    assert AUTH_HEADER_LEN % 8 == 0 and AUTH_OVERHEAD == 40


def ring(**kw: object) -> KeyFile:
    args: dict[str, object] = {"keys": {1: KEY, 2: bytes(range(16, 48))}, "sign_key_id": 1}
    args.update(kw)
    return KeyFile.from_ring(KeyRing(**args))  # type: ignore[arg-type]


def verifier(keys: KeyFile, kinds: tuple[int, ...] = (FrameKind.FEEDBACK,)) -> Verifier:
    return Verifier(keys, kinds=kinds, window=64)


def test_accepts_and_returns_payload() -> None:
    keys = ring()
    s = Signer(keys, sender_id=5, kind=FrameKind.FEEDBACK)
    v = verifier(keys)
    got = v.open(s.seal(b"hello"))
    assert got is not None and got.payload == b"hello" and got.sender_id == 5
    assert v.stats.accepted == 1 and v.stats.rejected == {}


def _reason(v: Verifier, data: bytes) -> str:
    before = dict(v.stats.rejected)
    assert v.open(data) is None
    diff = {k: n - before.get(k, 0) for k, n in v.stats.rejected.items() if n != before.get(k, 0)}
    assert len(diff) == 1 and next(iter(diff.values())) == 1
    return next(iter(diff))


def test_each_rejection_reason() -> None:
    keys = ring(key_senders={2: frozenset({9})}, senders=frozenset({5, 9}))
    v = verifier(keys)
    s = Signer(keys, sender_id=5, kind=FrameKind.FEEDBACK, epoch_us=1000)
    assert _reason(v, FRAME[:30]) == "short"
    assert _reason(v, b"\x00" * 64) == "unauthenticated"
    good = s.seal(b"x" * 32)
    assert _reason(v, good[:4] + b"\x09" + good[5:]) == "bad_version"
    assert _reason(v, Signer(keys, sender_id=5, kind=FrameKind.CONFIRM).seal(b"y")) == "bad_kind"
    assert _reason(v, encode_frame(b"z", key=KEY, kind=2, key_id=77, sender_id=5, counter=0,
                                   epoch=1)) == "unknown_key"
    flipped = bytearray(good)
    flipped[30] ^= 1
    assert _reason(v, bytes(flipped)) == "bad_mac"
    assert _reason(v, encode_frame(b"z", key=b"\x55" * 16, kind=2, key_id=1, sender_id=5,
                                   counter=0, epoch=1)) == "bad_mac"
    # key 2 is agent 9's own key: sender 5 may not use it
    assert _reason(v, encode_frame(b"z", key=bytes(range(16, 48)), kind=2, key_id=2,
                                   sender_id=5, counter=0, epoch=1)) == "key_not_allowed"
    assert _reason(v, Signer(keys, sender_id=6, kind=2).seal(b"z")) == "unknown_sender"
    assert v.open(good) is not None
    assert _reason(v, good) == "replay"
    for _ in range(70):
        assert v.open(s.seal(b"n")) is not None
    assert _reason(v, good) == "too_old"
    old = Signer(keys, sender_id=5, kind=FrameKind.FEEDBACK, epoch_us=999)
    assert _reason(v, old.seal(b"o")) == "old_epoch"
    small = Verifier(keys, kinds=(2,), max_senders=1)
    assert small.open(Signer(keys, sender_id=5, kind=2).seal(b"a")) is not None
    assert _reason(small, Signer(keys, sender_id=9, kind=2).seal(b"a")) == "too_many_senders"
    assert set(v.stats.rejected) | set(small.stats.rejected) == {
        "short", "unauthenticated", "bad_version", "bad_kind", "unknown_key", "bad_mac",
        "key_not_allowed", "unknown_sender", "replay", "too_old", "old_epoch",
        "too_many_senders"}


def test_reordering_inside_window_is_fine() -> None:
    w = ReplayWindow(16)
    order = [0, 3, 1, 2, 7, 5, 4, 6, 15, 8]
    assert [w.check(1, c) for c in order] == [None] * len(order)
    assert w.check(1, 3) == "replay"
    assert w.check(1, 40) is None and w.check(1, 20) == "too_old"
    assert w.check(1, 30) is None   # inside the window, not seen yet


def test_agent_restart_no_false_rejection() -> None:
    """A restarted sender starts its counter again at 0 under a later epoch."""
    keys = ring()
    v = verifier(keys)
    first = Signer(keys, sender_id=5, kind=2)
    for _ in range(100):
        assert v.open(first.seal(b"a")) is not None
    again = Signer(keys, sender_id=5, kind=2)      # restart: new epoch (start time)
    assert again.epoch > first.epoch
    for _ in range(100):
        assert v.open(again.seal(b"b")) is not None
    assert v.stats.rejected == {} and v.stats.accepted == 200
    assert v.open(first.seal(b"late")) is None      # the old run's frames are now refused
    assert v.stats.rejected == {"old_epoch": 1}


def test_key_rotation_without_losing_records(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "keys.yaml")
    r1 = generate_key_file(path, key_ids=(1,))
    sender_keys, recv_keys = KeyFile(path, recheck_s=0), KeyFile(path, recheck_s=0)
    s = Signer(sender_keys, sender_id=1, kind=1)
    v = Verifier(recv_keys, kinds=(1,))
    new = os.urandom(32)
    accepted = 0
    for step in range(4):
        for _ in range(50):
            accepted += v.open(s.seal(b"rec")) is not None
        if step == 0:   # receivers learn key 2 (still signing with 1)
            write_key_file(path, KeyRing(keys={1: r1.keys[1], 2: new}, sign_key_id=1))
        elif step == 1:  # senders sign with 2
            write_key_file(path, KeyRing(keys={1: r1.keys[1], 2: new}, sign_key_id=2))
        elif step == 2:  # key 1 retired
            write_key_file(path, KeyRing(keys={2: new}, sign_key_id=2))
        os.utime(path, ns=(step + 10**18, step + 10**18))   # a distinct mtime per step
    assert accepted == 200 and v.stats.rejected == {}
    assert recv_keys.reloads == 3
    stale = encode_frame(b"r", key=r1.keys[1], kind=1, key_id=1, sender_id=1,
                         counter=10**6, epoch=s.epoch)
    assert v.open(stale) is None and v.stats.rejected == {"unknown_key": 1}


def test_key_file_checks(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "k.yaml")
    generate_key_file(path, senders=[1, 2])
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert load_key_ring(path).senders == frozenset({1, 2})
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        load_key_ring(path)
    os.chmod(path, 0o600)
    for text, what in (("keys: []", "non-empty"), ("keys: [{id: 1, secret: zz}]", "hexadecimal"),
                       ("keys: [{id: 1, secret: '00'}]", "at least 16"),
                       ("sign: 3\nkeys: [{id: 1, secret: '" + "00" * 16 + "'}]", "sign key 3")):
        with open(path, "w") as fh:
            fh.write(text)
        with pytest.raises(KeyFileError, match=what):
            load_key_ring(path)
    with pytest.raises(KeyFileError, match="No such file"):
        load_key_ring(path + ".missing")


def test_reject_log_is_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    log = RejectLog(logging.getLogger("t.sec"), "agent", interval_s=3600)
    with caplog.at_level(logging.WARNING, "t.sec"):
        for _ in range(5000):
            log("bad_mac", "x")
        log("replay", "y")
    assert log.lines == 2 and len(caplog.records) == 2


def test_keys_command_makes_and_rotates(tmp_path: object) -> None:
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    path = Path(str(tmp_path)) / "keys.yaml"

    def keys(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "controller", "keys", "--out", str(path),
                               *args], cwd=root, capture_output=True, text=True, timeout=60,
                              check=False)

    assert keys("--sender", "10.0.1.1", "--controller").returncode == 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    first = load_key_ring(path)
    assert first.senders == frozenset({0x0A000101, 0xFFFFFFFF}) and list(first.keys) == [1]
    assert keys().returncode == 2                           # never overwritten
    assert keys("--rotate").returncode == 0 and load_key_ring(path).sign_key_id == 1
    assert keys("--sign", "2").returncode == 0
    after = load_key_ring(path)
    assert after.sign_key_id == 2 and after.keys[1] == first.keys[1] and len(after.keys) == 2
    assert "not among the keys" in keys("--sign", "9").stderr
