"""A dead link against the background loss of a loaded test bed (synthetic runs).

On kernel routers a link that is down counts nothing at all (its frames are dropped
before the interface counts them): the diagnosis sees it fall silent under a hung
transfer.  Meanwhile a user-space delay line elsewhere loses ~1 % under load.  The dead
link must rank first: 1 % loss cannot hang a transfer, a dead link does."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.diagnose import diagnose
from controller.diagnose.arbitrate import arbitrate
from controller.diagnose.engine import Culprit
from controller.diagnose.evidence import Evidence, LossSample
from controller.diagnose.synth import SynthFault, synth_ring
from controller.topology.load import load_topology

TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")
RANKS = ["h1", "h3", "h5", "h7"]
T0 = 1.7e9


def _silent_dead_link(target: str) -> Evidence:
    """A synthetic ring run with ``target`` down from 0.6 s, counted as kernel routers
    count it: neither direction sends or receives anything after the onset."""
    seed = next(s for s in range(1, 60) if any(
        target in f.path for f in synth_ring(TOPO, RANKS, None, seed=s).telemetry.flows))
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="link_down", target=target, onset=0.6),
                    seed=seed)
    a, _, b = target.partition("->")
    for k in (target, f"{b}->{a}"):
        if k in ev.telemetry.link_loss:
            ev.telemetry.link_loss[k] = [s for s in ev.telemetry.link_loss[k]
                                         if s.t < T0 + 0.6]
    return ev


def _noisy(ev: Evidence, link: str, rate: float, pkts_per_bin: int = 400) -> None:
    """``link`` busy all run (``pkts_per_bin`` per bin) and losing ``rate`` of it."""
    bins = sorted({s.t for ss in ev.telemetry.link_loss.values() for s in ss})
    ev.telemetry.link_loss[link] = [
        LossSample(t=t, lost=round(pkts_per_bin * rate), delivered=pkts_per_bin)
        for t in bins]


# (dead link, a WAN direction losing a little; the first two lie on the same hung
# transfer's path, where the loss once ranked first)
PLACES = [("s8:3->s5:2", "s5:3->s1:3"), ("s4:4->s2:2", "s2:3->s6:3"),
          ("s3:3->s1:1", "s1:3->s5:3")]


@pytest.mark.parametrize(("target", "noisy"), PLACES)
@pytest.mark.parametrize("noise", [0.012, 0.03])
def test_dead_link_outranks_a_low_loss_rate_elsewhere(target: str, noisy: str,
                                                      noise: float) -> None:
    ev = _silent_dead_link(target)
    _noisy(ev, noisy, noise)
    d = diagnose(ev)
    assert any(p.hung for p in d.view.pairs.values())
    keys = [(c.key, c.kind) for c in d.culprits]
    a, _, b = target.partition("->")
    assert keys[0] in ((f"link {target}", "link_down"), (f"link {b}->{a}", "link_down")), keys
    lossy = next(c for c in d.culprits if c.component == noisy)
    assert lossy.kind == "gray_loss" and lossy.confidence < d.culprits[0].confidence


def test_loss_without_a_hang_is_not_demoted() -> None:
    """No hung transfer: the same loss stays a gray loss at its own confidence."""
    seed = next(s for s in range(1, 60) if any(
        "s2:3->s6:3" in f.path for f in synth_ring(TOPO, RANKS, None, seed=s).telemetry.flows))
    ev = synth_ring(TOPO, RANKS, None, seed=seed)
    _noisy(ev, "s2:3->s6:3", 0.03)
    d = diagnose(ev)
    assert not any(p.hung for p in d.view.pairs.values())
    assert d.culprits[0].key == "link s2:3->s6:3" and d.culprits[0].kind == "gray_loss"
    assert "ranked_below_dead_link" not in d.culprits[0].evidence


def _c(name: str, kind: str, conf: float, **evid: object) -> Culprit:
    return Culprit(component=name, type="link", kind=kind, confidence=conf, onset=None,
                   evidence=dict(evid))


def test_the_link_silent_longest_broke_first() -> None:
    """A stalled ring silences the links after the break too, later: the first silent
    wins a tie of confidence."""
    later = _c("s8:3->s5:2", "link_down", 0.48, silent_while_upstream_delivered_s=1.8)
    first = _c("s3:3->s1:1", "link_down", 0.48, silent_while_upstream_delivered_s=3.8)
    loss = _c("s2:3->s6:3", "gray_loss", 0.5, loss_rate=0.012)
    assert [c.component for c in arbitrate([later, loss, first], hung=True)] == [
        "s3:3->s1:1", "s8:3->s5:2", "s2:3->s6:3"]


def test_heavy_loss_can_hang_and_keeps_its_rank() -> None:
    """A link losing most of its packets can hang a transfer itself: not demoted."""
    dead = _c("s3:3->s1:1", "link_down", 0.48, silent_while_upstream_delivered_s=2.0)
    heavy = _c("s2:3->s6:3", "gray_loss", 0.9, loss_rate=0.8)
    assert arbitrate([dead, heavy], hung=True)[0] is heavy


def _host(name: str, conf: float) -> Culprit:
    return Culprit(component=name, type="host", kind="slow_receiver", confidence=conf,
                   onset=None, evidence={})


def test_a_port_sending_at_a_twentieth_of_its_rate_outranks_a_slow_receiver() -> None:
    """A fabric port with a full queue sending at 5 % of its line rate is degraded by its
    own telemetry; a slow receiver would have emptied the queues, not filled one."""
    port = _c("s5:2->s8:3", "rate_degraded", 0.36, tx_over_line_rate=0.05,
              queue_max_pkts=64, role="fabric")
    got = arbitrate([_host("h3", 0.51), port], hung=False)
    assert [c.component for c in got] == ["s5:2->s8:3", "h3"]
    assert got[1].evidence["ranked_below_degraded_port"] == "s5:2->s8:3"


@pytest.mark.parametrize(("tx", "queue", "role"), [
    (0.9, 64, "fabric"),     # at line rate: congestion's signature, not a rate cut
    (0.05, 2, "fabric"),     # no standing queue
    (0.05, 64, "host"),      # the port facing a host: a slow host can back it up
])
def test_a_weaker_port_sign_leaves_the_host_first(tx: float, queue: int, role: str) -> None:
    port = _c("s5:2->s8:3", "rate_degraded", 0.36, tx_over_line_rate=tx,
              queue_max_pkts=queue, role=role)
    assert arbitrate([_host("h3", 0.51), port], hung=False)[0].component == "h3"


def test_the_break_is_where_the_longest_silence_begins() -> None:
    """The hung sender's retransmission timer backs off: the links before the break
    pause for over a second before the ranks stop.  The break is still the link whose
    silence began first, not the first link that paused."""
    target = "s1:1->s3:3"
    ev = _silent_dead_link(target)
    d0 = diagnose(ev)
    hung = [p for p, v in d0.view.pairs.items() if v.hung]
    assert hung
    t1 = d0.view.t1
    path = next(p for p in ev.telemetry.flows if target in p.path).path
    first = next(x for x in path if x in ev.telemetry.link_loss)
    assert first != target
    ev.telemetry.link_loss[first] = [s for s in ev.telemetry.link_loss[first]
                                     if s.t < t1 - 1.5]
    d = diagnose(ev)
    assert (d.culprits[0].key, d.culprits[0].kind) == (f"link {target}", "link_down"), [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]
