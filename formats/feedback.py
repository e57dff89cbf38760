"""Rate + FEC feedback: the controller -> host agent wire format.

One fixed-size little-endian record per flow, so a batch for one agent is a single
numpy buffer and neither side does per-flow Python work to (de)serialise it.  A UDP
datagram carries a whole number of records.

=============  ======  ================================================
field          type    meaning
=============  ======  ================================================
flow_id        u4      the agent's flow handle: the local QP number
seq            u4      feedback sequence (per controller, wraps)
decided_ns     u8      controller monotonic time of the decision
rate_bps       u8      rate to apply, bit/s (0: leave the rate unchanged)
fec_k          u2      data packets per FEC block (0: leave FEC unchanged)
fec_m          u2      repair packets per FEC block (0 with fec_k >= 1: FEC off)
flags          u2      bit 0: retransmission recommended; bit 1: DCQCN
reserved       u2      zero
=============  ======  ================================================

The controller encodes with ``controller.cc.feedback``; the host agent decodes with
``ebpf.feedback`` and forwards to the traffic sender's control socket.
"""
from __future__ import annotations

import numpy as np

__all__ = ["FEEDBACK_DTYPE", "FLAG_DCQCN", "FLAG_RETRANSMIT"]

FEEDBACK_DTYPE = np.dtype([
    ("flow_id", "<u4"), ("seq", "<u4"), ("decided_ns", "<u8"), ("rate_bps", "<u8"),
    ("fec_k", "<u2"), ("fec_m", "<u2"), ("flags", "<u2"), ("reserved", "<u2"),
])
assert FEEDBACK_DTYPE.itemsize == 32

FLAG_RETRANSMIT = 1
FLAG_DCQCN = 2
