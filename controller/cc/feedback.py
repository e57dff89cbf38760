"""Rate + FEC feedback records sent from the controller to a sender's agent.

The record layout is the shared wire format in ``formats.feedback``; this module
encodes batches of decisions into it (``fec_to_wire`` maps a loss-map decision,
k = 0 meaning "no FEC needed", onto its fields).
"""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from controller.cc.errors import TelemetryError
from formats.feedback import (  # noqa: F401 (re-exported)
    FEEDBACK_DTYPE,
    FLAG_DCQCN,
    FLAG_PATH_CHANGED,
    FLAG_RETRANSMIT,
)


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
