"""Loss emulation: rates inside their confidence intervals, Gilbert-Elliott bursts."""
from __future__ import annotations

import math
import struct
import time

import numpy as np
import pytest

from common.loss import LossModel
from ebpf.errors import ConfigError
from ebpf.loss import LossEmulator
from formats import roce

pytestmark = [pytest.mark.root, pytest.mark.bpf]


@pytest.fixture(scope="module")
def loss(pair):
    with LossEmulator(pair.h2.ifname, netns=pair.h2.name, udp_dport=4791) as em:
        yield em


def frames(pair, n: int, dport: int = 4791) -> list[bytes]:
    f = roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                         dst=pair.h2.ip, sport=51000, opcode=roce.Opcode.SEND_ONLY,
                         dest_qp=9, psn=0, dport=dport)
    return [f] * n


def settled(em: LossEmulator, matched: int, timeout_s: float = 5.0):
    """Counters once ``matched`` packets went through (softirq work may lag the send)."""
    deadline = time.monotonic() + timeout_s
    c = em.counters()
    while c.matched < matched and time.monotonic() < deadline:
        time.sleep(0.02)
        c = em.counters()
    return c


def test_parameters_validated():
    em = LossEmulator("lo")
    with pytest.raises(ConfigError, match=r"p_drop=1.5: expected a probability"):
        em.set_bernoulli(1.5)
    with pytest.raises(ConfigError, match="udp_dport 70000"):
        LossEmulator("lo", udp_dport=70000)


def test_ge_implied_rates():
    ge = LossModel.gilbert_elliott(p=0.01, r=0.25)
    assert math.isclose(ge.bad_fraction, 0.01 / 0.26)
    assert math.isclose(ge.mean_loss, ge.bad_fraction)
    assert ge.mean_burst_len == 4.0


def test_off_passes_everything_and_delivers(pair, loss):
    loss.disable()
    loss.reset_counters()
    pair.drain()
    pair.send(frames(pair, 200))
    assert len(pair.recv_udp(200)) == 200
    c = loss.counters()
    assert (c.matched, c.dropped) == (0, 0)


def test_bernoulli_rate_within_confidence_interval(pair, loss):
    n, p = 20000, 0.1
    loss.reset_counters()
    loss.set_bernoulli(p)
    pair.send(frames(pair, n))
    pair.send(frames(pair, 50, dport=5000))             # other ports are not subject to loss
    c = settled(loss, n)
    loss.disable()
    assert c.matched == n
    sigma = math.sqrt(n * p * (1 - p))
    assert abs(c.dropped - n * p) < 4.5 * sigma, c
    # independent losses: bursts are runs of a geometric length with mean 1/(1-p)
    assert abs(c.mean_burst_len - 1 / (1 - p)) < 0.05


def test_bernoulli_delivery_matches_counters(pair, loss):
    pair.drain()
    loss.reset_counters()
    loss.set_bernoulli(0.3)
    pair.send(frames(pair, 300))
    c = settled(loss, 300)
    got = pair.recv_udp(300, timeout_s=0.5)        # all that arrive, no more
    loss.disable()
    assert len(got) == c.matched - c.dropped and 0 < c.dropped < 300


def test_gilbert_elliott_bursts_match_parameters(pair, loss):
    n = 40000
    loss.reset_counters()
    ge = loss.set_model(LossModel.gilbert_elliott(p=0.02, r=0.25))
    pair.send(frames(pair, n))
    c = settled(loss, n)
    loss.disable()
    assert c.matched == n
    finished = int(c.burst_histogram.sum())
    assert finished >= c.bursts - 1 and c.bursts > 300
    # burst length is geometric(p_bg): mean 1/p_bg, P(len 1) = p_bg
    sd_mean = math.sqrt((1 - ge.r) / ge.r**2 / c.bursts)
    assert abs(c.mean_burst_len - ge.mean_burst_len) < 4.5 * sd_mean, c
    share1 = c.burst_histogram[1] / finished
    assert abs(share1 - ge.r) < 4.5 * math.sqrt(ge.r * (1 - ge.r) / finished)
    # long-run loss: bursts are independent renewal cycles; allow 25 %
    assert abs(c.loss_rate - ge.mean_loss) < 0.25 * ge.mean_loss, (c.loss_rate, ge.mean_loss)
    assert abs(c.bad_packets / n - ge.bad_fraction) < 0.25 * ge.bad_fraction


@pytest.mark.parametrize("slot_s,short", [(1e-9, True), (0.5, False), (0.0, False)])
def test_a_clocked_chain_ends_bursts_with_time(pair, loss, slot_s, short):
    """Bursts of 100 packets at 20 %: with a 1 ns slot every gap between two sent frames
    is thousands of slots, so the chain forgets its state between packets (runs of
    1/(1-pi) = 1.25 on average, loss still 20 %); with a slot longer than the whole run
    the clock never gets ahead of the packets (one slot each) and it is the packet
    chain, as with no slot."""
    n = 6000
    loss.reset_counters()
    loss.reseed(21)
    ge = loss.set_model(LossModel.bursty(0.2, 100).clocked(slot_s))
    pair.send(frames(pair, n))
    c = settled(loss, n)
    loss.disable()
    loss.reseed(None)
    assert c.matched == n
    if short:
        assert c.mean_burst_len < 1.6 and c.bursts > 600, c
        assert abs(c.loss_rate - ge.mean_loss) < 0.03, c
    else:
        assert c.mean_burst_len > 20, c


def test_dump_c_shows_the_loaded_source(pair):
    import io
    buf = io.StringIO()
    with LossEmulator(pair.h2.ifname, netns=pair.h2.name, prio=7, dump_source=buf):
        pass
    text = buf.getvalue()
    assert text.startswith("/* loss.c cflags: -I") and "int loss_filter(" in text


def test_sink_behind_loss_counts_exactly_the_dropped_psns(pair):
    """Loss (prio 6) and the INT sink (prio 20) share the hook: PSN gaps == drops."""
    from ebpf.sink import IntSink
    from formats import int_md
    from formats.int_md import HopRecord

    n = 1500                                    # fits the ring (no reads while sending)
    base = [roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                             dst=pair.h2.ip, sport=52000, opcode=roce.Opcode.SEND_ONLY,
                             dest_qp=0x700, psn=i) for i in range(n)]
    frames_int = [int_md.insert_int(f, [HopRecord(node_id=1)]) for f in base]
    with IntSink(pair.h2.ifname, netns=pair.h2.name) as sink, \
            LossEmulator(pair.h2.ifname, netns=pair.h2.name, prio=6, udp_only=True) as loss:
        loss.set_model(LossModel.gilbert_elliott(p=0.01, r=0.3))
        pair.send(frames_int)
        c = settled(loss, n)
        loss.disable()
        # each record covers a run of consecutive PSNs; stop() records the open one
        recs = np.concatenate([sink.read(timeout_s=0.5) for _ in range(3)] + [sink.stop()])
        assert recs["psn_count"].max() > 1
        psns = int_md.psn_runs_to_packets(recs["psn"], recs["psn_count"],
                                          recs["run_first_ns"], recs["run_last_ns"])[1]
        st = next(r for r in sink.flows() if r["key"]["dest_qp"] == 0x700)["stats"]
    assert c.dropped > 0 and len(psns) == n - c.dropped
    assert (np.diff(psns) > 0).all()
    inside = int(psns[-1] - psns[0] + 1 - len(psns))       # drops between first and last
    assert st["lost_packets"] == inside
    assert st["loss_events"] == int((np.diff(psns) > 1).sum())
    assert st["out_of_order"] == 0 and st["packets"] == len(psns)


def test_frames_behind_link_sequence_header_are_subject_to_loss(pair):
    f = frames(pair, 1)[0]
    seq = f[:12] + struct.pack("!HIH", 0x88B5, 7, 0x0800) + f[14:]   # link seq header
    with LossEmulator(pair.h2.ifname, netns=pair.h2.name, prio=8, udp_dport=4791) as em, \
            LossEmulator(pair.h2.ifname, netns=pair.h2.name, prio=9, link_seq=False) as off:
        em.set_bernoulli(1.0)
        off.set_bernoulli(1.0)
        pair.send([seq] * 10)
        c = settled(em, 10)
        assert (c.matched, c.dropped) == (10, 10)
        em.disable()
        pair.send([seq] * 10)
        time.sleep(0.1)
        assert off.counters().matched == 0          # link_seq=False: those frames pass


def test_seeded_loss_repeats_exactly(pair):
    from ebpf.sink import IntSink

    base = [roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                             dst=pair.h2.ip, sport=53000, opcode=roce.Opcode.SEND_ONLY,
                             dest_qp=0x800, psn=i) for i in range(400)]

    def run(seed):
        with IntSink(pair.h2.ifname, netns=pair.h2.name) as sink, \
                LossEmulator(pair.h2.ifname, netns=pair.h2.name, prio=6, udp_dport=4791,
                             seed=seed) as em:
            em.set_model(LossModel.gilbert_elliott(p=0.05, r=0.3, k=0.98))
            pair.send(base)
            c = settled(em, len(base))
            st = next(r for r in sink.flows() if r["key"]["dest_qp"] == 0x800)["stats"]
            return c.dropped, c.bursts, int(st["lost_packets"]), int(st["loss_events"])

    a, b, other = run(11), run(11), run(12)
    assert a == b and a[0] > 0
    assert other != a
