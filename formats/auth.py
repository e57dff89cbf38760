"""Authenticated framing of agent <-> controller datagrams (host-record batches,
rate/FEC feedback, confirmations): formats/FORMATS.md "Authenticated frame".

A frame wraps one unchanged inner datagram (``formats.agent_batch``,
``formats.feedback``) between a 24-byte header and a 16-byte tag, all fields in
network byte order::

    offset size field      meaning
    0      4    magic      0x494E5441 ("INTA")
    4      1    version    1
    5      1    kind       1 host-record batch, 2 rate/FEC feedback, 3 confirmations
    6      2    key_id     which shared key made the tag (two are valid while keys rotate)
    8      4    sender_id  who sent it (an agent's id, the controller's id)
    12     4    counter    +1 per frame of this sender and kind within one epoch
    16     8    epoch      the sender's start time, microseconds since the Unix epoch
    24     n    payload    the inner datagram, byte for byte
    24+n   16   tag        HMAC-SHA256(key, bytes 0 .. 24+n) truncated to 128 bits

The header is 8-byte aligned, so records behind an inner header stay aligned for
``np.frombuffer``.  (epoch, counter) is the frame's sequence: a restarted sender
has a later epoch (its start time), so the receiver starts a new window for it
instead of rejecting its counters as replays; within an epoch the receiver keeps a
sliding window (``common.auth.replay``) so reordering inside the window is fine and a
repeat or anything older is dropped.  The tag covers every header field, so no
field can be changed without the key.  Verifying (which key, which sender, which
sequence) is ``common.auth.channel``; this module only lays out and checks bytes.
"""
from __future__ import annotations

import enum
import hashlib
import hmac
import struct
from dataclasses import dataclass

AUTH_MAGIC = 0x494E5441
AUTH_VERSION = 1
AUTH_HEADER_LEN = 24
AUTH_TAG_LEN = 16
AUTH_OVERHEAD = AUTH_HEADER_LEN + AUTH_TAG_LEN
MIN_KEY_LEN = 16
"""Shortest secret accepted (bytes): 128 bits, the tag's strength."""
CONTROLLER_SENDER_ID = 0xFFFFFFFF
"""The controller's default sender id (255.255.255.255: never an agent's IPv4 address)."""
CONTROLLER_SENDER_IDS = range(0xFFFFFF00, 0x1_0000_0000)
"""Sender ids of controllers (255.255.255.0/24, no host's address); agents take
feedback frames from these only.  A standby controller takes its own id
(``controller run --sender-id``): receivers keep one replay window per sender, so two
controllers sharing an id would take each other's frames for replays."""

_HEADER = struct.Struct("!IBBHIIQ")
assert _HEADER.size == AUTH_HEADER_LEN


class FrameKind(enum.IntEnum):
    """What the payload is; a receiver accepts only the kinds it expects."""

    HOST_BATCH = 1
    FEEDBACK = 2
    CONFIRM = 3


class FrameError(ValueError):
    """A frame is not well formed (``reason`` is the counter name, text says why)."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


@dataclass(slots=True, frozen=True, kw_only=True)
class FrameHeader:
    """Decoded header fields of one frame."""

    kind: int
    key_id: int
    sender_id: int
    counter: int
    epoch: int
    version: int = AUTH_VERSION


def frame_tag(key: bytes, signed: bytes | memoryview) -> bytes:
    """The 16-byte tag over ``signed`` (header + payload)."""
    return hmac.new(key, signed, hashlib.sha256).digest()[:AUTH_TAG_LEN]


def encode_frame(payload: bytes, *, key: bytes, kind: int, key_id: int, sender_id: int,
                 counter: int, epoch: int) -> bytes:
    """One frame around ``payload`` (the inner datagram)."""
    if len(key) < MIN_KEY_LEN:
        raise FrameError("short_key", f"auth frame: key of {len(key)} B, at least "
                                      f"{MIN_KEY_LEN} B required")
    head = _HEADER.pack(AUTH_MAGIC, AUTH_VERSION, kind & 0xFF, key_id & 0xFFFF,
                        sender_id & 0xFFFFFFFF, counter & 0xFFFFFFFF,
                        epoch & 0xFFFFFFFFFFFFFFFF)
    signed = head + payload
    return signed + frame_tag(key, signed)


def is_frame(data: bytes) -> bool:
    """True when ``data`` starts like a frame (magic only: nothing is verified)."""
    return len(data) >= 4 and data[:4] == b"INTA"


def decode_frame_header(data: bytes) -> FrameHeader:
    """Header of ``data``; checks magic, length and version (not the tag)."""
    if not is_frame(data):
        raise FrameError("unauthenticated", f"auth frame: starts {data[:4].hex() or 'empty'}, "
                                            f"not {AUTH_MAGIC:#010x} (not an authenticated frame)")
    if len(data) < AUTH_OVERHEAD:
        raise FrameError("short", f"auth frame: {len(data)} bytes, at least "
                                  f"{AUTH_OVERHEAD} needed")
    _magic, version, kind, key_id, sender, counter, epoch = _HEADER.unpack_from(data)
    if version != AUTH_VERSION:
        raise FrameError("bad_version", f"auth frame: version {version}, expected "
                                        f"{AUTH_VERSION}")
    return FrameHeader(kind=kind, key_id=key_id, sender_id=sender, counter=counter,
                       epoch=epoch, version=version)


def check_tag(data: bytes, key: bytes) -> bool:
    """True when the frame's tag was made with ``key`` (constant-time comparison)."""
    end = len(data) - AUTH_TAG_LEN
    return hmac.compare_digest(frame_tag(key, memoryview(data)[:end]), data[end:])


def frame_payload(data: bytes) -> bytes:
    """The inner datagram of a frame (after its tag was checked)."""
    return data[AUTH_HEADER_LEN:len(data) - AUTH_TAG_LEN]


__all__ = [
    "AUTH_HEADER_LEN",
    "AUTH_MAGIC",
    "AUTH_OVERHEAD",
    "AUTH_TAG_LEN",
    "AUTH_VERSION",
    "CONTROLLER_SENDER_ID",
    "CONTROLLER_SENDER_IDS",
    "MIN_KEY_LEN",
    "FrameError",
    "FrameHeader",
    "FrameKind",
    "check_tag",
    "decode_frame_header",
    "encode_frame",
    "frame_payload",
    "frame_tag",
    "is_frame",
]
