"""Selective repeat after an incast collapse: a sender whose first round trips saw
seconds of queueing (so its minimum RTT is seconds) and which then loses a whole
window must still recover in a few timeouts, not one packet per timeout (seen in the
incast_cc experiment under heavy load: one flow needed minutes)."""
from __future__ import annotations

import zlib

from traffic.qp_types import QpConfig
from traffic.requester import Requester
from traffic.responder import Responder
from traffic.simlink import SimLink


def test_a_whole_lost_window_recovers_after_a_congested_start():
    req = Requester(cfg=QpConfig(qpn=1, peer_qpn=2, peer_ip="10.0.0.2", rate_bps=1e8,
                                 window_pkts=256),
                    local_ip="10.0.0.1", sport=1000)
    resp = Responder(cfg=QpConfig(qpn=2, peer_qpn=1, peer_ip="10.0.0.1"),
                     local_ip="10.0.0.2", sport=2000)
    req.post_write(bytes(4096))
    link = SimLink(req=req, resp=resp, delay_s=0.7)  # 1.4 s round trips: a full queue
    link.run(until=lambda: req.idle)
    assert req.srtt_s is not None and req.srtt_s > 1.0
    link.delay_s = 0.001  # the queue drained ...
    first = link._fwd + 1
    link.drop = lambda n, b: first <= n < first + 64  # ... and the next window was lost
    msg = bytes(range(256)) * 256
    req.post_write(msg)
    t0 = link.now
    link.run(until=lambda: req.idle and resp.counters.msgs_done == 2, max_s=120)
    assert resp.messages[-1].crc32 == zlib.crc32(msg)
    # a couple of timeouts (about 2 s each with that RTT), then every loss at once
    assert link.now - t0 < 10.0, (link.now - t0, req.counters.timeouts)
    assert req.counters.timeouts <= 8
