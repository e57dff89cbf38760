"""Rate + FEC feedback and its confirmation: controller <-> host agent wire formats.

One fixed-size little-endian record per flow, so a batch for one agent is a single
numpy buffer and neither side does per-flow Python work to (de)serialise it.  A UDP
datagram carries a whole number of records.

Feedback, controller -> agent (``FEEDBACK_DTYPE``, 32 B):

=============  ======  ================================================
field          type    meaning
=============  ======  ================================================
flow_id        u4      the agent's flow handle: the local QP number
seq            u4      feedback sequence (per controller, wraps)
decided_ns     u8      controller monotonic time of the decision
rate_bps       u8      rate to apply, bit/s (0: leave the rate unchanged)
fec_k          u2      data packets per FEC block (0: leave FEC unchanged)
fec_m          u2      repair packets per FEC block (0 with fec_k >= 1: FEC off)
flags          u2      bit 0: retransmission recommended; bit 1: DCQCN;
                       bit 2: the flow's route changed (path notice)
reserved       u2      zero
=============  ======  ================================================

Confirmation, agent -> the UDP address the feedback came from (``CONFIRM_DTYPE``,
32 B), one per feedback record once its fate is known:

=============  ======  ================================================
field          type    meaning
=============  ======  ================================================
flow_id        u4      ``flow_id`` of the feedback record
seq            u4      ``seq`` of the feedback record
decided_ns     u8      ``decided_ns`` of the feedback record, echoed
hold_ns        u8      agent time from receiving the feedback to receiving
                       the endpoint's answer (or to giving up), ns
applied_psn    u4      PSN from which the new setting is in effect: the
                       requester's next PSN to send (0 unless APPLIED)
status         u2      ``ConfirmStatus``
reserved       u2      zero
=============  ======  ================================================

No clock is shared: ``decided_ns`` is the controller's clock and comes back
unchanged, ``hold_ns`` is a duration on the agent's clock.  The controller takes
its round trip (send -> confirmation received) minus ``hold_ns``, halves it for the
one-way network delay and adds ``hold_ns`` back: an estimate of send -> applied.

The controller encodes feedback with ``controller.cc.feedback``; the host agent
decodes it with ``ebpf.feedback``, forwards it to the traffic sender's control
socket and sends the confirmations.  A controller that does not read them and an
agent that does not send them both keep working: no confirmation, no sample.
"""
from __future__ import annotations

import enum

import numpy as np

__all__ = ["CONFIRM_DTYPE", "CONFIRM_MAX_RECORDS", "FEEDBACK_DTYPE", "FEEDBACK_UDP_PORT", "FLAG_DCQCN",
           "FLAG_PATH_CHANGED", "FLAG_RETRANSMIT", "ConfirmStatus"]

FEEDBACK_DTYPE = np.dtype([
    ("flow_id", "<u4"), ("seq", "<u4"), ("decided_ns", "<u8"), ("rate_bps", "<u8"),
    ("fec_k", "<u2"), ("fec_m", "<u2"), ("flags", "<u2"), ("reserved", "<u2"),
])
assert FEEDBACK_DTYPE.itemsize == 32

FEEDBACK_UDP_PORT = 32768
"""Default UDP port a host agent receives the controller's feedback on."""

FLAG_RETRANSMIT = 1
FLAG_DCQCN = 2
FLAG_PATH_CHANGED = 4
"""The controller rewrote the routes this flow used (a mitigation's reroute): the
sender resets its retransmission backoff and, if it is stalled, resends its oldest
unacknowledged packets at once (``traffic.control``: ``"path_changed": true``).  A
record may carry this flag alone (rate 0, fec_k 0: nothing else changes)."""

CONFIRM_DTYPE = np.dtype([
    ("flow_id", "<u4"), ("seq", "<u4"), ("decided_ns", "<u8"), ("hold_ns", "<u8"),
    ("applied_psn", "<u4"), ("status", "<u2"), ("reserved", "<u2"),
])
assert CONFIRM_DTYPE.itemsize == 32

CONFIRM_MAX_RECORDS = 45
"""Confirmations per datagram: 45 x 32 B = 1440 B fits a 1500-byte MTU."""


class ConfirmStatus(enum.IntEnum):
    """What became of one feedback record (``CONFIRM_DTYPE.status``)."""

    APPLIED = 0
    """The endpoint applied it; ``applied_psn`` is where it takes effect."""
    UNKNOWN_QP = 1
    """The endpoint has no requester QP ``flow_id``."""
    REJECTED = 2
    """The endpoint refused the value (e.g. a FEC setting its QP mode cannot use)."""
    INVALID = 3
    """The agent refused the record (QP or value outside the control protocol's range)."""
    NO_ENDPOINT = 4
    """The agent has no endpoint to hand it to (none configured, or none listening)."""
    ENDPOINT_BUSY = 5
    """The endpoint's control socket queue was full: the record was dropped."""
    UNCONFIRMED = 6
    """Forwarded, but the endpoint never answered (one without confirmations)."""
