"""Queue bytes under traffic manager tail drops (p4/README.md, "Queue bytes").

The test plays a tail-dropping FIFO traffic manager: every packet runs ingress
(which counts its bytes into the egress port's queue bytes); a packet that finds
the queue full is dropped there and never reaches egress, as in v1model, where
the program is not told. Egress runs one packet at a time with deq_qdepth =
packets still queued behind it. The documented bound: true bytes queued <=
queue bytes <= deq_qdepth * (port MTU + 20), and exact once the queue drains.
"""
from __future__ import annotations

import collections

from tests.helpers.p4int import H2_MAC, IntSwitch, decode_hop_words, roce_frame, split_int

FRAME_OVERHEAD = 20   # Ethernet header + link sequence header (README)


def queue_switch(make_program, mtu: int | None) -> IntSwitch:
    s = IntSwitch.build(1, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    if mtu is not None:
        s.mtu(2, mtu)
    s.watch()
    s.sink(2, "host")
    return s


def run_tail_drop(s: IntSwitch, frames: list[bytes], *, capacity: int, arrivals: int,
                  mtu: int) -> dict[str, int]:
    """Offer ``arrivals`` frames per departure to a FIFO of ``capacity`` packets.

    After every departure it checks the register and the packet's HPCC hop
    record against the bound; returns counts for the caller's checks."""
    from softswitch.v1model.jobs import IngressJob
    queue: collections.deque = collections.deque()   # (egress job, counted bytes)
    dropped = departed = max_excess = 0
    it = iter(frames)
    exhausted = False
    while not exhausted or queue:
        for _ in range(arrivals):
            f = next(it, None)
            if f is None:
                exhausted = True
                break
            _, eg = s.switch.run_ingress(IngressJob(port=1, data=f))
            (job,) = eg
            if len(queue) >= capacity:
                dropped += 1          # tail drop: ingress counted it, egress never runs
            else:
                queue.append((job, len(f)))
        if not queue:
            continue
        job, _ = queue.popleft()
        job.sm.deq_qdepth = len(queue)
        _, _, outs = s.switch.run_egress(job)
        (out,) = outs
        departed += 1
        true_bytes = sum(n for _, n in queue)
        reported = s.reg("queue_bytes", 2)
        bound = len(queue) * (mtu + FRAME_OVERHEAD)
        assert true_bytes <= reported <= bound, (departed, true_bytes, reported, bound)
        if not queue:
            assert reported == 0
        d = split_int(out.data)
        (hop,) = decode_hop_words(d["stack"], d["inst"], d["ds"], d["hop_ml"])
        assert hop["queue_bytes"] == reported
        assert hop["queue_occupancy"] == len(queue)
        max_excess = max(max_excess, reported - true_bytes)
    return {"dropped": dropped, "departed": departed, "max_excess": max_excess}


def mixed_frames(n: int, start: int = 0) -> list[bytes]:
    sizes = (64, 400, 1000, 200, 1200)
    return [roce_frame(psn=start + i, payload=bytes(sizes[i % len(sizes)])) for i in range(n)]


def test_queue_bytes_stay_bounded_under_tail_drops(make_program):
    s = queue_switch(make_program, None)          # default MTU 1500
    stats = run_tail_drop(s, mixed_frames(300), capacity=8, arrivals=2, mtu=1500)
    assert stats["dropped"] > 100                  # the drift the bound has to hold back
    assert s.reg("queue_bytes", 2) == 0            # drained: exact again


def test_queue_bytes_bound_follows_the_port_mtu_and_recovers(make_program):
    mtu = 1400
    s = queue_switch(make_program, mtu)
    run_tail_drop(s, mixed_frames(200), capacity=4, arrivals=3, mtu=mtu)
    # After the drain, a burst without drops is counted exactly again.
    frames = mixed_frames(5, start=1000)
    stats = run_tail_drop(s, frames, capacity=64, arrivals=5, mtu=mtu)
    assert stats["dropped"] == 0 and stats["max_excess"] == 0


def test_queue_bytes_exact_without_drops(make_program):
    s = queue_switch(make_program, None)
    stats = run_tail_drop(s, mixed_frames(60), capacity=64, arrivals=2, mtu=1500)
    assert stats["dropped"] == 0 and stats["max_excess"] == 0
