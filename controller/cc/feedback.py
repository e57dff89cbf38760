"""Rate + FEC feedback records sent from the controller to a sender's agent.

One fixed-size little-endian record per flow, so a batch for one agent is a
single numpy buffer (no per-flow Python work on either side):

=============  ======  ================================================
field          type    meaning
=============  ======  ================================================
flow_id        u4      the agent's flow / QP handle
seq            u4      feedback sequence (per controller, wraps)
decided_ns     u8      controller monotonic time of the decision
rate_bps       u8      rate to apply, bit/s
fec_k          u2      data packets per FEC block (0: leave FEC unchanged)
fec_m          u2      repair packets per FEC block (0 with fec_k >= 1: FEC off)
flags          u2      bit 0: retransmission recommended; bit 1: DCQCN
reserved       u2      zero
=============  ======  ================================================

``rate_bps`` 0 leaves the rate unchanged. The sender side accepts fec_k 1..128
and fec_m 0..16; ``fec_to_wire`` maps a loss-map decision (k = 0: no FEC
needed) onto these fields.
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from controller.cc.errors import TelemetryError

FEEDBACK_DTYPE = np.dtype([
    ("flow_id", "<u4"), ("seq", "<u4"), ("decided_ns", "<u8"), ("rate_bps", "<u8"),
    ("fec_k", "<u2"), ("fec_m", "<u2"), ("flags", "<u2"), ("reserved", "<u2"),
])
"""32-byte feedback record."""

FLAG_RETRANSMIT = 1
FLAG_DCQCN = 2


def encode_feedback(*, flow_id: npt.ArrayLike, seq: npt.ArrayLike, decided_ns: npt.ArrayLike,
                    rate_bps: npt.ArrayLike, fec_k: npt.ArrayLike = 0,
                    fec_m: npt.ArrayLike = 0, flags: npt.ArrayLike = 0) -> bytes:
    """Pack a batch of feedback records (arguments broadcast against ``flow_id``)."""
    fid = np.asarray(flow_id)
    rec = np.zeros(fid.shape[0] if fid.ndim else 1, dtype=FEEDBACK_DTYPE)
    rate = np.asarray(rate_bps, dtype=np.float64)
    if np.any(~np.isfinite(rate)) or np.any(rate < 0):
        raise TelemetryError("encode_feedback: rate_bps must be finite and non-negative")
    rec["flow_id"] = fid
    rec["seq"] = np.asarray(seq, dtype=np.int64) & 0xFFFFFFFF
    rec["decided_ns"] = decided_ns
    rec["rate_bps"] = np.round(rate).astype(np.uint64)
    rec["fec_k"] = fec_k
    rec["fec_m"] = fec_m
    rec["flags"] = flags
    return rec.tobytes()


def decode_feedback(buf: bytes) -> np.ndarray:
    """Unpack a buffer of feedback records into a structured array."""
    if len(buf) % FEEDBACK_DTYPE.itemsize:
        raise TelemetryError(
            f"decode_feedback: {len(buf)} bytes is not a multiple of the "
            f"{FEEDBACK_DTYPE.itemsize}-byte record")
    return np.frombuffer(buf, dtype=FEEDBACK_DTYPE).copy()


def fec_to_wire(fec_k: npt.ArrayLike, fec_m: npt.ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """(fec_k, fec_m) fields for decisions where k = 0 means "no FEC": sent as k = 1,
    m = 0 (blocks of one packet, no repair) so the sender switches FEC off rather
    than keeping its previous setting."""
    k = np.asarray(fec_k, dtype=np.int64)
    m = np.asarray(fec_m, dtype=np.int64)
    off = k == 0
    return np.where(off, 1, k), np.where(off, 0, m)
