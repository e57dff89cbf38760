"""Rate/FEC feedback: from the controller's records to the traffic endpoint's JSON lines.

The controller sends UDP datagrams of fixed 32-byte little-endian records
(``formats.feedback.FEEDBACK_DTYPE``: flow_id, seq, decided_ns, rate_bps, fec_k,
fec_m, flags, reserved); ``flow_id`` is the local QP number.  The agent turns each
record into one line of the traffic endpoint's control protocol (``traffic.control``:
JSON objects, one per line, over a UNIX datagram socket)::

    {"qp": 17, "rate_bps": 25000000000.0, "fec_k": 16, "fec_m": 2}

``rate_bps`` 0 means "no rate change"; ``fec_k`` 0 means "no FEC change".  Records the
endpoint would reject (QP 0 or above 2^24-1, rate outside 1e3..4e11, FEC outside
1..128 / 0..16) are counted and not forwarded.
"""

from __future__ import annotations

import json

import numpy as np

from formats.feedback import FEEDBACK_DTYPE

__all__ = ["FEEDBACK_DTYPE", "decode_feedback_datagram", "feedback_to_lines"]

_RATE_MIN_BPS, _RATE_MAX_BPS = 1e3, 4e11


def decode_feedback_datagram(data: bytes) -> np.ndarray | None:
    """Records of one datagram, or None when its length is not a whole number of them."""
    if not data or len(data) % FEEDBACK_DTYPE.itemsize:
        return None
    return np.frombuffer(data, FEEDBACK_DTYPE)


def feedback_to_lines(records: np.ndarray) -> tuple[list[str], int]:
    """(JSON lines for the endpoint, number of records rejected)."""
    qp = records["flow_id"]
    rate = records["rate_bps"].astype(np.float64)
    k, m = records["fec_k"], records["fec_m"]
    has_rate = rate > 0
    has_fec = k > 0
    ok = (qp >= 1) & (qp <= 0xFFFFFF) & (has_rate | has_fec)
    ok &= ~has_rate | ((rate >= _RATE_MIN_BPS) & (rate <= _RATE_MAX_BPS))
    ok &= ~has_fec | ((k <= 128) & (m <= 16))
    lines = []
    for i in np.flatnonzero(ok):  # one line per accepted record (feedback is per flow, rare)
        obj: dict[str, object] = {"qp": int(qp[i])}
        if has_rate[i]:
            obj["rate_bps"] = float(rate[i])
        if has_fec[i]:
            obj["fec_k"], obj["fec_m"] = int(k[i]), int(m[i])
        lines.append(json.dumps(obj, separators=(",", ":")))
    return lines, int(records.size - ok.sum())
