"""Rate/FEC feedback: from the controller's records to the traffic endpoint's JSON lines,
and the endpoint's answers back into confirmation records for the controller.

The controller sends UDP datagrams of fixed 32-byte little-endian records
(``formats.feedback.FEEDBACK_DTYPE``: flow_id, seq, decided_ns, rate_bps, fec_k,
fec_m, flags, reserved); ``flow_id`` is the local QP number.  The agent turns each
record into one line of the traffic endpoint's control protocol (``traffic.control``:
JSON objects, one per line, over a UNIX datagram socket)::

    {"qp": 17, "rate_bps": 25000000000.0, "fec_k": 16, "fec_m": 2, "seq": 81}

``rate_bps`` 0 means "no rate change"; ``fec_k`` 0 means "no FEC change"; the flag
``FLAG_PATH_CHANGED`` becomes ``"path_changed": true`` (the controller moved the
flow's route: the sender rearms its retransmission timer).  Records the
endpoint would reject (QP 0 or above 2^24-1, rate outside 1e3..4e11, FEC outside
1..128 / 0..16) are counted and not forwarded.

``seq`` asks the endpoint for a confirmation; its answer (``{"confirm": [{"seq", "qp",
"status", "psn"}, ...]}``) becomes ``formats.feedback.CONFIRM_DTYPE`` records
(``parse_confirm_reply`` + ``encode_confirmations``) that the agent sends back to the
address the feedback came from.
"""

from __future__ import annotations

import json

import numpy as np

from formats.feedback import CONFIRM_DTYPE, FEEDBACK_DTYPE, FLAG_PATH_CHANGED, ConfirmStatus

__all__ = ["CONFIRM_DTYPE", "FEEDBACK_DTYPE", "ConfirmStatus", "decode_feedback_datagram",
           "encode_confirmations", "feedback_lines", "feedback_to_lines", "parse_confirm_reply"]

_RATE_MIN_BPS, _RATE_MAX_BPS = 1e3, 4e11
_STATUS_BY_NAME = {"applied": ConfirmStatus.APPLIED, "unknown_qp": ConfirmStatus.UNKNOWN_QP,
                   "rejected": ConfirmStatus.REJECTED}


def decode_feedback_datagram(data: bytes) -> np.ndarray | None:
    """Records of one datagram, or None when its length is not a whole number of them."""
    if not data or len(data) % FEEDBACK_DTYPE.itemsize:
        return None
    return np.frombuffer(data, FEEDBACK_DTYPE)


def feedback_lines(records: np.ndarray, *, with_seq: bool = True) -> tuple[list[str], np.ndarray]:
    """(JSON lines for the endpoint, mask of the records they come from); the lines
    carry the record's ``seq`` (a confirmation request) unless ``with_seq`` is False."""
    qp = records["flow_id"]
    rate = records["rate_bps"].astype(np.float64)
    k, m = records["fec_k"], records["fec_m"]
    has_rate = rate > 0
    has_fec = k > 0
    moved = (records["flags"] & FLAG_PATH_CHANGED) != 0
    ok = (qp >= 1) & (qp <= 0xFFFFFF) & (has_rate | has_fec | moved)
    ok &= ~has_rate | ((rate >= _RATE_MIN_BPS) & (rate <= _RATE_MAX_BPS))
    ok &= ~has_fec | ((k <= 128) & (m <= 16))
    lines = []
    for i in np.flatnonzero(ok):  # one line per accepted record (feedback is per flow, rare)
        obj: dict[str, object] = {"qp": int(qp[i])}
        if has_rate[i]:
            obj["rate_bps"] = float(rate[i])
        if has_fec[i]:
            obj["fec_k"], obj["fec_m"] = int(k[i]), int(m[i])
        if moved[i]:
            obj["path_changed"] = True
        if with_seq:
            obj["seq"] = int(records["seq"][i])
        lines.append(json.dumps(obj, separators=(",", ":")))
    return lines, ok


def feedback_to_lines(records: np.ndarray) -> tuple[list[str], int]:
    """(JSON lines for the endpoint without confirmation requests, records rejected)."""
    lines, ok = feedback_lines(records, with_seq=False)
    return lines, int(records.size - ok.sum())


def parse_confirm_reply(data: bytes) -> list[tuple[int, int, ConfirmStatus, int]] | None:
    """(seq, qp, status, applied_psn) per entry of an endpoint's ``{"confirm": [...]}``
    reply; None for anything else (an error or stats reply, garbage)."""
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    entries = obj.get("confirm") if isinstance(obj, dict) else None
    if not isinstance(entries, list):
        return None
    out = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        seq, qp, psn = e.get("seq"), e.get("qp"), e.get("psn", 0)
        status = _STATUS_BY_NAME.get(str(e.get("status")), ConfirmStatus.REJECTED)
        if not isinstance(seq, int) or not isinstance(qp, int) or not isinstance(psn, int):
            continue
        out.append((seq, qp, status, psn & 0xFFFFFF))
    return out


def encode_confirmations(rows: list[tuple[int, int, int, int, int, int]]) -> np.ndarray:
    """CONFIRM_DTYPE records from (flow_id, seq, decided_ns, hold_ns, applied_psn, status)."""
    rec = np.zeros(len(rows), CONFIRM_DTYPE)
    if rows:
        a = np.array(rows, dtype=np.uint64)
        for j, name in enumerate(("flow_id", "seq", "decided_ns", "hold_ns", "applied_psn",
                                  "status")):
            rec[name] = a[:, j]
    return rec
