"""The delay line's timing and loss model, without sockets or clocks."""
import itertools
import random

import pytest

from common.loss import LossModel, LossProcess
from mininet_topos.delayline import DelayLineCore, WanError, WanParams, main


def core(**kw):
    return DelayLineCore(WanParams(**kw).check(), random.Random(1))


def test_constant_delay_no_rate():
    c = core(delay_ms=10)
    assert c.arrive(1.0, b"x" * 100) == pytest.approx(1.010)
    assert c.arrive(1.001, b"y" * 100) == pytest.approx(1.011)
    assert c.next_due_s() == pytest.approx(1.010)
    assert c.due(1.0099) == []
    assert c.due(1.0105) == [b"x" * 100]
    assert c.due(2.0) == [b"y" * 100] and c.in_flight == 0 and c.next_due_s() is None


RATE_CASES = [
    # rate_mbps, frame bytes, frames arriving together, expected last tx_end offset (s)
    (8.0, 1000, 1, 0.001),
    (8.0, 1000, 10, 0.010),
    (100.0, 1250, 4, 4 * 1250 * 8 / 100e6),
]


@pytest.mark.parametrize("rate,size,n,last", RATE_CASES)
def test_rate_serialises_back_to_back(rate, size, n, last):
    c = core(delay_ms=0, rate_mbps=rate)
    times = [c.arrive(5.0, bytes(size)) for _ in range(n)]
    assert times[-1] == pytest.approx(5.0 + last)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert all(g == pytest.approx(size * 8 / (rate * 1e6)) for g in gaps)


def test_rate_idle_link_starts_at_arrival():
    c = core(delay_ms=1, rate_mbps=8)
    assert c.arrive(1.0, bytes(1000)) == pytest.approx(1.002)
    assert c.arrive(3.0, bytes(1000)) == pytest.approx(3.002)


def test_queue_limit_tail_drops():
    c = core(delay_ms=0, rate_mbps=8, queue_pkts=3)
    verdicts = [c.arrive(0.0, bytes(1000)) for _ in range(5)]
    assert [v is None for v in verdicts] == [False, False, False, True, True]
    assert c.stats.queue_drops == 2 and c.stats.max_backlog_pkts == 3
    assert c.arrive(0.0011, bytes(1000)) is not None  # first frame has left the queue


def test_jitter_bounds_and_fifo_order():
    c = core(delay_ms=10, jitter_ms=5)
    times = [c.arrive(i * 1e-4, bytes(64)) for i in range(2000)]
    assert times == sorted(times)  # never reordered
    assert min(t - i * 1e-4 for i, t in enumerate(times)) >= 0.005 - 1e-12
    frames = c.due(10.0)
    assert len(frames) == 2000


def test_jitter_with_reorder_reorders_but_stays_in_bounds():
    c = core(delay_ms=10, jitter_ms=5, reorder=True)
    for i in range(2000):
        t = c.arrive(i * 1e-4, i.to_bytes(2, "big"))
        assert 0.005 - 1e-12 <= t - i * 1e-4 <= 0.015 + 1e-12
    order = [int.from_bytes(f, "big") for f in c.due(10.0)]
    assert sorted(order) == list(range(2000)) and order != sorted(order)


def test_live_parameter_change_applies_to_new_frames():
    c = core(delay_ms=10)
    assert c.arrive(0.0, b"a") == pytest.approx(0.010)
    c.set_params(WanParams(delay_ms=50).check())
    assert c.arrive(0.0, b"b") == pytest.approx(0.050)


LOSS_CASES = [
    LossModel.bernoulli(0.05),
    LossModel.bernoulli(0.3),
    LossModel.gilbert_elliott(p=0.01, r=0.2),
    LossModel.gilbert_elliott(p=0.05, r=0.3, h=0.2, k=0.99),
    LossModel.bursty(0.01, 5.0),
]


@pytest.mark.parametrize("model", LOSS_CASES)
def test_loss_process_within_confidence_interval(model):
    n = 100_000
    proc = LossProcess(model, random.Random(7))
    lost = sum(proc.lost() for _ in range(n))
    lo, hi = model.loss_count_interval(n)
    assert lo <= lost <= hi, (lost, lo, hi)


def test_gilbert_elliott_is_bursty():
    proc = LossProcess(LossModel.bursty(0.02, 5.0), random.Random(3))
    seq = [proc.lost() for _ in range(200_000)]
    runs, cur = [], 0
    for x in seq:
        if x:
            cur += 1
        elif cur:
            runs.append(cur)
            cur = 0
    assert 4.0 < sum(runs) / len(runs) < 6.0  # mean burst length 1/r


def test_loss_counted_after_serialisation():
    c = core(delay_ms=0, rate_mbps=8, loss=LossModel.bernoulli(1.0))
    assert c.arrive(0.0, bytes(1000)) is None
    assert c.stats.lost == 1 and c._tx_free_s == pytest.approx(0.001)


PARAM_ERRORS = [
    ({"delay_ms": 201}, "delay_ms 201 out of range 0..200"),
    ({"delay_ms": -1}, "delay_ms -1 out of range"),
    ({"delay_ms": 5, "jitter_ms": 6}, "jitter_ms 6 out of range 0..delay_ms (5)"),
    ({"rate_mbps": 0.0001}, "rate_mbps 0.0001 out of range"),
    ({"queue_pkts": 0}, "queue_pkts 0 out of range"),
    ({"loss": LossModel.bernoulli(2.0)}, "loss bernoulli p 2.0 out of range 0..1"),
]


@pytest.mark.parametrize("kw,message", PARAM_ERRORS)
def test_param_errors(kw, message):
    with pytest.raises(WanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        WanParams(**kw).check()


def test_params_round_trip_and_unknown_field():
    p = WanParams(delay_ms=20, jitter_ms=2, rate_mbps=50, loss=LossModel.bursty(0.01),
                  queue_pkts=100, reorder=True, seed=4)
    assert WanParams.from_dict(p.to_dict()) == p
    with pytest.raises(WanError, match="unknown field.*delay"):
        WanParams.from_dict({"delay": 3})


def test_cli_rejects_bad_loss(capsys):
    with pytest.raises(SystemExit):
        main(["--a", "x", "--b", "y", "--loss", "gilbert:0.1"])
    assert "expected none, P, P%, bernoulli:P, ge:p,r[,h[,k]] or ge:P%/BURST" in capsys.readouterr().err
    assert main(["--a", "x", "--b", "y", "--delay-ms", "300"]) == 1
    assert "delay_ms 300.0 out of range" in capsys.readouterr().err


@pytest.mark.parametrize("l4", ["udp", "tcp"])
@pytest.mark.parametrize("payload_len", [0, 1, 17, 1000])
def test_complete_checksum_matches_scapy(l4, payload_len):
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.l2 import Ether

    from mininet_topos.delayline import complete_checksum

    layer = UDP(sport=1234, dport=4791) if l4 == "udp" else TCP(sport=1, dport=2, flags="PA")
    pkt = Ether(src="00:00:00:00:00:01", dst="00:00:00:00:00:02") / IP(
        src="10.0.0.1", dst="10.0.0.2") / layer / bytes(i % 256 for i in range(payload_len))
    good = bytes(pkt)
    # what an offloading stack hands over: the pseudo-header sum in the checksum field
    ip = Ether(good)[IP]
    l4_len = len(ip) - ip.ihl * 4
    pseudo = 0x0A00 + 0x0001 + 0x0A00 + 0x0002 + ip.proto + l4_len  # src, dst, proto, len
    while pseudo >> 16:
        pseudo = (pseudo & 0xFFFF) + (pseudo >> 16)
    off = 14 + ip.ihl * 4 + (6 if l4 == "udp" else 16)
    partial = good[:off] + pseudo.to_bytes(2, "big") + good[off + 2:]
    assert complete_checksum(partial) == good
    assert complete_checksum(b"\x00" * 20) == b"\x00" * 20  # not IPv4: untouched
