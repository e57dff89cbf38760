"""Seal and open ``formats.auth`` frames; count and (rate-limited) log rejections.

``Signer`` belongs to a sender: its epoch is its start time in microseconds, its
counter goes up by one per frame, and it signs with the key file's current ``sign``
key.  ``Verifier`` belongs to a receiver: it opens a frame only when the kind is one
it expects, the key id is known, the tag is right, the key may be used by that
sender, the sender is known and the sequence is new (``common.auth.replay``); otherwise
the frame is dropped and counted under one reason:

================  =========================================================
reason            the frame ...
================  =========================================================
unauthenticated   has no frame magic (an unauthenticated datagram)
short             is shorter than a header and a tag
bad_version       has a frame version this code does not know
bad_kind          carries a kind this receiver does not take
unknown_key       names a key id not in the key file
bad_mac           has a tag that the named key did not make
key_not_allowed   uses a per-agent key that belongs to another sender
unknown_sender    comes from a sender not in the key file's ``senders``
old_epoch         is from an earlier run of the sender (a recording)
too_old           is older than the replay window
replay            was seen before
too_many_senders  would need more replay windows than ``max_senders``
unknown_source    comes from an address that may not send it (counted by the
                  caller, e.g. the agent: feedback from no admitted controller)
================  =========================================================

Checks that need no secret come first, the tag before anything that keeps state, so
forged frames cost one HMAC and never move a replay window.
"""
from __future__ import annotations

import hashlib
import hmac
import logging
import time
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from formats.auth import (
    AUTH_HEADER_LEN,
    AUTH_MAGIC,
    AUTH_OVERHEAD,
    AUTH_TAG_LEN,
    AUTH_VERSION,
    FrameError,
    FrameHeader,
    check_tag,
    decode_frame_header,
    encode_frame,
    frame_payload,
)

from .keys import KeyFile, KeyRing
from .replay import ReplayWindow

_MAGIC = AUTH_MAGIC.to_bytes(4, "big")
#: formats.auth's header as a numpy record, to check many frames at once
_HEADER_DTYPE = np.dtype([("magic", ">u4"), ("version", "u1"), ("kind", "u1"),
                          ("key_id", ">u2"), ("sender_id", ">u4"), ("counter", ">u4"),
                          ("epoch", ">u8")])
assert _HEADER_DTYPE.itemsize == AUTH_HEADER_LEN

__all__ = ["REJECT_REASONS", "Opened", "RejectLog", "Signer", "Verifier", "VerifierStats"]

REJECT_REASONS = ("short", "unauthenticated", "bad_version", "bad_kind", "unknown_key",
                  "bad_mac", "key_not_allowed", "unknown_sender", "old_epoch", "too_old",
                  "replay", "too_many_senders", "unknown_source")


class Signer:
    """Frames of one kind from one sender."""

    def __init__(self, keys: KeyFile, *, sender_id: int, kind: int,
                 epoch_us: int | None = None) -> None:
        self.keys = keys
        self.sender_id = sender_id & 0xFFFFFFFF
        self.kind = kind
        self.epoch = time.time_ns() // 1000 if epoch_us is None else epoch_us
        self.counter = 0

    def seal(self, payload: bytes) -> bytes:
        ring = self.keys.ring()
        if self.counter > 0xFFFFFFFF:   # 2^32 frames in one epoch: start a new one
            self.epoch = max(self.epoch + 1, time.time_ns() // 1000)
            self.counter = 0
        out = encode_frame(payload, key=ring.sign_key, kind=self.kind,
                           key_id=ring.sign_key_id, sender_id=self.sender_id,
                           counter=self.counter, epoch=self.epoch)
        self.counter += 1
        return out


@dataclass(slots=True, frozen=True)
class Opened:
    """An accepted frame: who sent it and the inner datagram."""

    header: FrameHeader
    payload: bytes

    @property
    def sender_id(self) -> int:
        return self.header.sender_id


@dataclass(slots=True, kw_only=True)
class VerifierStats:
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())


class RejectLog:
    """At most one log line per reason per ``interval_s``, saying how many were
    dropped since the last line: a flood of forgeries cannot flood the log."""

    def __init__(self, logger: logging.Logger, what: str, interval_s: float = 10.0) -> None:
        self.logger = logger
        self.what = what
        self.interval_s = interval_s
        self._next: dict[str, float] = {}
        self._since: Counter[str] = Counter()
        self.lines = 0

    def __call__(self, reason: str, detail: str) -> None:
        self._since[reason] += 1
        now = time.monotonic()
        if now < self._next.get(reason, 0.0):
            return
        self._next[reason] = now + self.interval_s
        n, self._since[reason] = self._since[reason], 0
        self.lines += 1
        self.logger.warning("%s: dropped %d frame(s) (%s), latest: %s", self.what, n, reason,
                            detail)


class Verifier:
    """Opens frames of the given kinds; everything else is counted by reason."""

    def __init__(self, keys: KeyFile, *, kinds: tuple[int, ...], window: int = 4096,
                 max_senders: int = 65536, log: RejectLog | None = None,
                 only_senders: frozenset[int] | None = None) -> None:
        self.keys = keys
        self.only_senders = only_senders
        """Senders this receiver takes frames from at all (e.g. an agent: only the
        controller), on top of the key file's ``senders``."""
        self.kinds = frozenset(kinds)
        self.window = window
        self.max_senders = max_senders
        self.log = log
        self.stats = VerifierStats()
        self._windows: dict[tuple[int, int], ReplayWindow] = {}

    def reject(self, reason: str, detail: str) -> None:
        """Count (and maybe log) one rejection; callers use it for their own reasons."""
        self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + 1
        if self.log is not None:
            self.log(reason, detail)

    def open(self, data: bytes, source: object = None) -> Opened | None:
        """The frame's sender and payload, or None (counted) when it is rejected."""
        if data[:4] != _MAGIC:   # the flood's common case: no exception, no parsing
            self.reject("unauthenticated", f"{data[:4].hex() or 'empty'} from {source}")
            return None
        try:
            h = decode_frame_header(data)
        except FrameError as exc:
            self.reject(exc.reason, f"{exc} from {source}")
            return None
        if h.kind not in self.kinds:
            self.reject("bad_kind", f"kind {h.kind} from {source}")
            return None
        ring = self.keys.ring()
        key = ring.keys.get(h.key_id)
        if key is None:
            self.reject("unknown_key", f"key id {h.key_id} from {source}")
            return None
        if not check_tag(data, key):
            self.reject("bad_mac", f"sender {h.sender_id} key {h.key_id} from {source}")
            return None
        allowed = ring.key_senders.get(h.key_id)
        if allowed is not None and h.sender_id not in allowed:
            self.reject("key_not_allowed", f"sender {h.sender_id} used key {h.key_id}")
            return None
        if (ring.senders is not None and h.sender_id not in ring.senders) or (
                self.only_senders is not None and h.sender_id not in self.only_senders):
            self.reject("unknown_sender", f"sender {h.sender_id} from {source}")
            return None
        wkey = (h.sender_id, h.kind)
        win = self._windows.get(wkey)
        if win is None:
            if len(self._windows) >= self.max_senders:
                self.reject("too_many_senders", f"sender {h.sender_id}")
                return None
            win = self._windows[wkey] = ReplayWindow(self.window)
        why = win.check(h.epoch, h.counter)
        if why is not None:
            self.reject(why, f"sender {h.sender_id} epoch {h.epoch} counter {h.counter}")
            return None
        self.stats.accepted += 1
        return Opened(h, frame_payload(data))

    def open_rows(self, buf: np.ndarray, lens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Open many frames at once: row i of ``buf`` holds a frame of ``lens[i]``
        bytes (0: no frame).  Returns (accepted mask, sender id per row); a frame's
        payload is then ``buf[i, AUTH_HEADER_LEN:lens[i] - AUTH_TAG_LEN]``.

        The same checks and counters as ``open``, in the same order: the checks
        without a secret on all headers with numpy, then per frame one HMAC (one
        C call, ``hmac.digest``) and the replay window."""
        lens = lens.astype(np.int64)
        h = np.ascontiguousarray(buf[:, :AUTH_HEADER_LEN]).view(_HEADER_DTYPE)[:, 0]
        ok = lens > 0
        kinds = np.asarray(sorted(self.kinds), np.uint8)
        for reason, fails in (("unauthenticated", (lens < 4) | (h["magic"] != AUTH_MAGIC)),
                              ("short", lens < AUTH_OVERHEAD),
                              ("bad_version", h["version"] != AUTH_VERSION),
                              ("bad_kind", ~np.isin(h["kind"], kinds))):
            bad = ok & fails
            k = int(bad.sum())
            if k:
                self.stats.rejected[reason] = self.stats.rejected.get(reason, 0) + k
                if self.log is not None:
                    self.log(reason, f"{k} frame(s) of a batch")
                ok &= ~bad
        ring = self.keys.ring()
        sender = h["sender_id"].astype(np.uint32)
        rows = np.flatnonzero(ok)
        for i, key_id, snd, kind, counter, epoch, ln in zip(
                rows.tolist(), h["key_id"][rows].tolist(), sender[rows].tolist(),
                h["kind"][rows].tolist(), h["counter"][rows].tolist(),
                h["epoch"][rows].tolist(), lens[rows].tolist()):
            why = self._check_one(ring, buf[i], ln, key_id, snd, kind, counter, epoch)
            if why is not None:
                ok[i] = False
                self.reject(why, f"sender {snd} key {key_id} epoch {epoch} counter {counter}")
            else:
                self.stats.accepted += 1
        return ok, sender

    def _check_one(self, ring: KeyRing, row: np.ndarray, ln: int, key_id: int, snd: int,
                   kind: int, counter: int, epoch: int) -> str | None:
        """Key, tag, sender and replay checks of one frame (``open``'s order)."""
        key = ring.keys.get(key_id)
        if key is None:
            return "unknown_key"
        end = ln - AUTH_TAG_LEN
        tag = hmac.digest(key, row[:end].data, hashlib.sha256)[:AUTH_TAG_LEN]
        if not hmac.compare_digest(tag, row[end:ln].tobytes()):
            return "bad_mac"
        allowed = ring.key_senders.get(key_id)
        if allowed is not None and snd not in allowed:
            return "key_not_allowed"
        senders = ring.senders
        if (senders is not None and snd not in senders) or (
                self.only_senders is not None and snd not in self.only_senders):
            return "unknown_sender"
        wkey = (snd, kind)
        win = self._windows.get(wkey)
        if win is None:
            if len(self._windows) >= self.max_senders:
                return "too_many_senders"
            win = self._windows[wkey] = ReplayWindow(self.window)
        return win.check(epoch, counter)
