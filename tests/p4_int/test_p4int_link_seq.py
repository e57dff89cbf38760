"""Exact per-link loss counting with link sequence numbers: crafted sequence gaps,
reordering, resynchronisation, and drops injected on a link between two switches."""
from __future__ import annotations

import random

from tests.helpers.p4int import H2_MAC, Chain, IntSwitch, roce_frame, with_link_seq

LOST = "SwitchIngress.link_lost_packets"
REORDERED = "SwitchIngress.link_reordered_packets"
EVENTS = "SwitchIngress.link_loss_events"
RESYNCS = "SwitchIngress.link_resyncs"
EXPECTED = "SwitchIngress.link_rx_expected"


def receiver(make_program) -> IntSwitch:
    s = IntSwitch.build(2, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    return s


def feed(s: IntSwitch, seqs: list[int], port: int = 1) -> int:
    """Send one frame per sequence number; returns how many were forwarded."""
    forwarded = 0
    for i, seq in enumerate(seqs):
        forwarded += len(s.process(port, with_link_seq(roce_frame(psn=i), seq)))
    return forwarded


def test_gaps_count_exact_losses_and_one_digest_per_gap(make_program):
    s = receiver(make_program)
    assert feed(s, [0, 1, 2, 5, 6, 10, 11]) == 7
    assert s.reg(LOST, 1) == 2 + 3
    assert s.reg(EVENTS, 1) == 2
    assert s.reg(REORDERED, 1) == 0
    assert s.reg(EXPECTED, 1) == 12
    digests = [tuple(d) for d in s.digests()]
    assert digests == [(1, 3, 5), (1, 7, 10)]
    # Other ports are unaffected.
    assert s.reg(LOST, 2) == 0 and s.reg(EXPECTED, 2) == 0


def test_loss_on_the_first_packets_counts(make_program):
    s = receiver(make_program)
    feed(s, [4, 5])
    assert s.reg(LOST, 1) == 4
    assert [tuple(d) for d in s.digests()] == [(1, 0, 4)]


def test_reordering_is_counted_and_takes_the_loss_back(make_program):
    s = receiver(make_program)
    feed(s, [0, 1, 3, 2, 4, 5])
    assert s.reg(REORDERED, 1) == 1
    assert s.reg(LOST, 1) == 0
    assert s.reg(EVENTS, 1) == 1          # the jump 1 -> 3 was reported when it happened
    assert s.reg(EXPECTED, 1) == 6


def test_a_restarted_neighbour_resynchronises(make_program):
    s = receiver(make_program)
    feed(s, list(range(5000, 5010)))     # first jump is a loss of 5000 packets
    lost_before = s.reg(LOST, 1)
    feed(s, [0, 1, 2])                    # the neighbour restarted: far behind
    assert s.reg(RESYNCS, 1) == 1
    assert s.reg(LOST, 1) == lost_before
    assert s.reg(REORDERED, 1) == 0
    assert s.reg(EXPECTED, 1) == 3


def test_sequence_wraps_around_2_to_the_32(make_program):
    s = receiver(make_program)
    s.set_reg(EXPECTED, 1, 0xFFFFFFFE)
    feed(s, [0xFFFFFFFE, 0xFFFFFFFF, 0, 2])
    assert s.reg(LOST, 1) == 1
    assert [tuple(d) for d in s.digests()] == [(1, 1, 2)]


def test_packets_dropped_on_a_link_are_counted_exactly(make_program):
    """s1 -> s2 -> s3 with 1000 packets; a seeded random 5% lost on the s1-s2 wire."""
    chain = Chain.build(3, make_program)
    s1, s2, s3 = chain.switches
    rng = random.Random(4791)
    lost, gaps, delivered, in_gap = 0, 0, 0, False
    for psn in range(1000):
        (port, data), = s1.process(1, roce_frame(psn=psn))
        assert port == 2
        if psn < 999 and rng.random() < 0.05:     # the last one arrives, closing any gap
            lost += 1
            gaps += 0 if in_gap else 1
            in_gap = True
            continue
        in_gap = False
        (port2, data2), = s2.process(1, data)
        assert port2 == 2
        delivered += len(s3.process(1, data2))
    assert lost > 20 and delivered == 1000 - lost
    assert s2.reg(LOST, 1) == lost
    assert s2.reg(EVENTS, 1) == gaps
    digests = [tuple(d) for d in s2.digests()]
    assert len(digests) == gaps
    assert sum(r - e for _, e, r in digests) == lost
    # s2 -> s3 lost nothing.
    assert s3.reg(LOST, 1) == 0 and s3.reg(EVENTS, 1) == 0
    assert s3.reg(EXPECTED, 1) == 1000 - lost
