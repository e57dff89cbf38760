"""The netem backend of WAN links: command lines, read-back, the probe and selection.

The command builder and the read-back parser are pure and tested without root.  On a
kernel without sch_netem the probe must say so with the kernel's answer, ``auto`` must
fall back to the delay line (which must still shape real packets), and an explicit
``netem`` must fail clearly; the NetemWan test itself runs where the kernel has netem.
"""
import statistics

import pytest

from common.loss import LossModel
from mininet_topos.wan import (
    NetemUnavailableError,
    NetemWan,
    WanError,
    WanLink,
    WanParams,
    make_wan_link,
    netem_args,
    netem_available,
    netem_params_from_tc,
    netem_unavailable_reason,
)

PREFIX = ["tc", "qdisc", "replace", "dev", "eth9", "root", "netem"]

ARG_CASES = [
    ("defaults", WanParams(),
     ["limit", "1000", "delay", "10000us"]),
    ("no delay", WanParams(delay_ms=0.0, queue_pkts=50),
     ["limit", "50", "delay", "0us"]),
    ("delay and jitter", WanParams(delay_ms=20.5, jitter_ms=1.25, reorder=True),
     ["limit", "1000", "delay", "20500us", "1250us"]),
    ("rate", WanParams(delay_ms=2.0, rate_mbps=20.0, queue_pkts=10_000),
     ["limit", "10000", "delay", "2000us", "rate", "20000000bit"]),
    ("slow rate", WanParams(delay_ms=1.0, rate_mbps=0.5),
     ["limit", "1000", "delay", "1000us", "rate", "500000bit"]),
    ("bernoulli", WanParams(delay_ms=1.0, loss=LossModel.bernoulli(0.05)),
     ["limit", "1000", "delay", "1000us", "loss", "random", "5%"]),
    # classic Gilbert channel: never delivered in bad, always in good -> 1-h 100%, 1-k 0%
    ("gilbert", WanParams(delay_ms=1.0, loss=LossModel.gilbert_elliott(0.01, 0.3)),
     ["limit", "1000", "delay", "1000us", "loss", "gemodel", "1%", "30%", "100%", "0%"]),
    # our h/k are delivery chances; netem takes loss chances 1-h and 1-k
    ("gilbert-elliott", WanParams(delay_ms=1.0,
                                  loss=LossModel.gilbert_elliott(0.02, 0.25, h=0.4, k=0.99)),
     ["limit", "1000", "delay", "1000us", "loss", "gemodel", "2%", "25%", "60%", "1%"]),
    ("everything", WanParams(delay_ms=200.0, jitter_ms=5.0, rate_mbps=100.0, reorder=True,
                             queue_pkts=3000, loss=LossModel.bernoulli(0.001)),
     ["limit", "3000", "delay", "200000us", "5000us", "loss", "random", "0.1%",
      "rate", "100000000bit"]),
]


@pytest.mark.parametrize(("params", "tail"), [c[1:] for c in ARG_CASES],
                         ids=[c[0] for c in ARG_CASES])
def test_netem_args_table(params, tail):
    assert netem_args("eth9", params) == PREFIX + tail


def test_netem_args_in_a_namespace_and_bad_input():
    assert netem_args("eth9", WanParams(), netns="ns1")[:3] == ["tc", "-n", "ns1"]
    with pytest.raises(WanError, match="netem on eth9: jitter_ms 2.0 without reorder"):
        netem_args("eth9", WanParams(delay_ms=5.0, jitter_ms=2.0))
    with pytest.raises(WanError, match="netem on eth9: delay_ms 300 out of range"):
        netem_args("eth9", WanParams(delay_ms=300))


def _tc_options(params: WanParams) -> dict:
    """What ``tc -j qdisc show`` prints for a netem qdisc set by netem_args (seconds,
    fractions, bytes/s, the bad-state value as "1-h")."""
    opts: dict = {"limit": params.queue_pkts, "ecn": False, "gap": 0}
    if params.delay_ms:
        opts["delay"] = {"delay": params.delay_ms / 1e3, "jitter": params.jitter_ms / 1e3,
                         "correlation": 0}
    loss = params.loss
    if loss.kind.value == "bernoulli":
        opts["loss-random"] = {"loss": loss.p, "correlation": 0}
    elif loss.kind.value == "gilbert-elliott":
        opts["loss-gemodel"] = {"p": loss.p, "r": loss.r, "1-h": 1 - loss.h, "1-k": 1 - loss.k}
    if params.rate_mbps:
        opts["rate"] = {"rate": int(params.rate_mbps * 1e6 / 8), "packetoverhead": 0}
    return opts


@pytest.mark.parametrize("params", [c[1] for c in ARG_CASES], ids=[c[0] for c in ARG_CASES])
def test_read_back_round_trip(params):
    assert netem_params_from_tc(_tc_options(params), reorder=params.reorder) == params


def test_bad_backend_named():
    with pytest.raises(WanError, match="backend 'kernel' is not one of auto, delayline, netem"):
        make_wan_link("x0", "x1", backend="kernel")
    with pytest.raises(WanError, match="give params or shaping keywords"):
        make_wan_link("x0", "x1", backend="delayline", params=WanParams(), delay_ms=3)


def test_delayline_backend_is_the_delay_line():
    link = make_wan_link("x0", "x1", backend="delayline", delay_ms=3.0)
    assert isinstance(link, WanLink) and link.params().delay_ms == 3.0


def test_auto_keeps_delay_line_where_netem_cannot_match_it():
    # jitter without reorder: only the delay line keeps order, whatever the kernel has
    link = make_wan_link("x0", "x1", delay_ms=5.0, jitter_ms=1.0)
    assert isinstance(link, WanLink)
    # a seeded link must replay its loss sequence: only the delay line can
    link = make_wan_link("x0", "x1", delay_ms=5.0, loss=LossModel.bernoulli(0.1), seed=3)
    assert isinstance(link, WanLink)


# -- on this machine's kernel -----------------------------------------------------------
needs_no_netem = pytest.mark.skipif("netem_available()", reason="kernel has sch_netem")


@pytest.mark.root
@needs_no_netem
def test_probe_says_no_and_explains():
    reason = netem_unavailable_reason()
    assert reason is not None and reason.startswith("tc qdisc add ... netem failed: ")
    assert len(reason) > len("tc qdisc add ... netem failed: ")  # the kernel's words
    assert netem_available() is False


@pytest.mark.root
@needs_no_netem
def test_explicit_netem_raises_naming_the_kernel_answer():
    with pytest.raises(NetemUnavailableError) as err:
        make_wan_link("x0", "x1", backend="netem", delay_ms=5.0)
    msg = str(err.value)
    assert "backend 'netem' asked for, but the kernel has no netem" in msg
    assert netem_unavailable_reason() in msg


@pytest.fixture
def bed():
    from test_wanlink import Bed  # the delay line tests' two-host bed, used read-only

    b = Bed()
    try:
        yield b
    finally:
        b.close()


def _median_delay_ms(got) -> float:
    return statistics.median((rx - sent) / 1e6 for _, sent, rx in got)


@pytest.mark.root
@needs_no_netem
def test_auto_falls_back_to_delay_line_and_shapes(bed):
    link = make_wan_link(bed.m1.ifname, bed.m2.ifname, netns=bed.mid.name,
                         backend="auto", delay_ms=15.0)
    assert isinstance(link, WanLink)
    with link:
        got = bed.blast(100, pps=300)
        assert link.applied_params() == link.params()
    assert len(got) == 100
    assert abs(_median_delay_ms(got) - 15.0) < 1.0


@pytest.mark.root
@pytest.mark.skipif("not netem_available()", reason="kernel has no sch_netem")
def test_netem_wan_delay_loss_read_back_and_cleanup(bed):
    params = WanParams(delay_ms=20.0, rate_mbps=50.0, queue_pkts=2000,
                       loss=LossModel.gilbert_elliott(0.02, 0.25, h=0.4, k=0.99))
    link = make_wan_link(bed.m1.ifname, bed.m2.ifname, netns=bed.mid.name,
                         backend="netem", params=params)
    assert isinstance(link, NetemWan)
    with link:
        assert link.applied_params() == params
        link.update(loss=LossModel.none())
        assert link.applied_params().loss == LossModel.none()
        got = bed.blast(150, pps=300)
        assert len(got) == 150
        assert abs(_median_delay_ms(got) - 20.0) < 1.0
        assert link.stats()["ab"]["tx_pkts"] >= 150
    assert not link.running
    qdiscs = bed.mid.run(["tc", "qdisc", "show", "dev", bed.m2.ifname]).stdout
    assert "netem" not in qdiscs and "clsact" not in qdiscs
