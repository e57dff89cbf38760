"""The dead-link rule against the shapes of the link counters' exports (table-driven).

A link is dead when the hung pair's packets still reach it (the links before it
deliver, or the sender's transfer is outstanding) and its counters, *read*, show
nothing.  Each row of the controller's ``link_loss`` export is what a link delivered
since its previous read, and a read that found nothing writes no row: silence is
known only where the link's switch is known to have been read.  The false cases are
the eBPF test bed's (``experiment faults --switch ebpf``, seeds 3 and 4): an export
with one time per switch (a slow round read s7 seven seconds before s5), a link's next
row not yet exported at the end of the trial, and a link after the break kept busy by
other pairs' traffic."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.diagnose import diagnose
from controller.diagnose.engine import _dead_links
from controller.diagnose.evidence import Evidence, FlowSample, LossSample
from controller.diagnose.synth import SynthFault, synth_ring
from controller.diagnose.transfers import analyse
from controller.topology.load import load_topology

TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")
RANKS = ["h1", "h3", "h5", "h7"]
T0 = 1.7e9
# the hung pair h3 -> h5 (ranks 1 -> 2) on the path INT showed in the eBPF runs
PATH = ("h3:0->s4:1", "s4:3->s1:2", "s1:3->s5:3", "s5:1->s7:3", "s7:1->h5:0")
# links the other pairs keep busy before the hang (they make a round's rows wide)
OTHERS = ("s3:3->s1:1", "s1:1->s3:3", "s1:2->s4:3", "s7:3->s5:1", "s8:3->s5:2")


def _hung_ring(rows: dict[str, list[tuple[float, int]]]) -> Evidence:
    """A ring whose pair h3 -> h5 hung at 0.6 s, with ``rows`` as the link counters'
    export: link -> [(seconds before the end of the run, packets delivered)]."""
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="link_down", target="s1:3->s5:3",
                                            onset=0.6), seed=1)
    end = ev.end_time
    ev.telemetry.link_loss = {
        link: [LossSample(t=end - before, lost=0, delivered=n)
               for before, n in sorted(rs, reverse=True)] for link, rs in rows.items()}
    ip = {h.name: h.ipv4 for h in TOPO.hosts}
    ev.telemetry.flows = [FlowSample(t=T0 + 0.1, src=ip["h3"], dst=ip["h5"], qp=1 << 16 | 2 << 8,
                                     path=PATH)]
    return ev


def _dead(ev: Evidence) -> dict[str, tuple[float, float]]:
    view = analyse(ev.records, ev.end_time)
    hung = {k for k, p in view.pairs.items() if p.hung}
    assert hung == {(1, 2)}
    return _dead_links(ev, view, ev.rank_hosts(), hung)


def _rounds(times: list[float], links: tuple[str, ...], n: int = 3000
            ) -> dict[str, list[tuple[float, int]]]:
    return {ln: [(t, n) for t in times] for ln in links}


CASES = {
    # s3 trial 13: one time per switch; s7 (after the WAN) was read 6 s before the end
    # and not again before the trial's rows stopped, s5 and s1 later: nothing says
    # s5:1->s7:3 was silent (it was not: a congested WAN, 3,772 packets in its last row)
    "switch read early in a slow round": ({
        "s4:3->s1:2": [(9.0, 620), (2.8, 6800)],
        "s1:3->s5:3": [(9.8, 1600), (-0.3, 6000)],
        "s5:1->s7:3": [(5.8, 3800)],
        "s8:3->s5:2": [(9.8, 1800), (-0.3, 6800)],
        "s1:1->s3:3": [(0.8, 7700)]}, {}),
    # s3 trial 22 / s4 trial 24: the first link after the sender's access link, its
    # last row 1.0-1.5 s before the end, its switch not read since
    "next row not exported yet": ({
        "s4:3->s1:2": [(11.0, 1400), (1.1, 7500)],
        "s1:3->s5:3": [(6.0, 5200), (-1.0, 2600)],
        "s5:1->s7:3": [(4.0, 6500), (-1.0, 1550)],
        "s1:1->s3:3": [(9.0, 3000), (0.0, 4900)]}, {}),
    # s4 trial 17 (a real link down): rounds read every switch at one time; after the
    # break the WAN before it still carries the hung pair's retransmissions and
    # s5:1->s7:3 is absent from every round
    "silent in later rounds": ({
        **_rounds([9.0, 7.0], OTHERS),
        "s4:3->s1:2": [(9.0, 3000), (7.0, 8000), (5.0, 2), (3.0, 2), (1.0, 2)],
        "s1:3->s5:3": [(9.0, 3000), (7.0, 5000), (5.0, 3), (3.0, 2), (1.0, 3)],
        "s5:1->s7:3": [(9.0, 3000), (7.0, 7900)]}, {"s5:1->s7:3": (6.0, 0.95)}),
    # one time per switch, but another link into s7 has a later row: s7 was read then
    "read with another link into its switch": ({
        "s4:3->s1:2": [(8.0, 8000), (1.5, 2)],
        "s1:3->s5:3": [(8.5, 5000), (1.0, 3)],
        "s5:1->s7:3": [(7.0, 7900)],
        "s6:1->s7:4": [(2.0, 1)]}, {"s5:1->s7:3": (5.0, 0.95)}),
    # the break at s4:3->s1:2; the WAN after it stays busy with other pairs' traffic,
    # which is none of the hung pair's: s5:1->s7:3 after it is silent but not dead
    "busy link after the break": ({
        **_rounds([9.0, 7.0], OTHERS),
        "s4:3->s1:2": [(9.0, 3000), (7.0, 8000)],
        "s1:3->s5:3": [(t, 400) for t in (9.0, 7.0, 5.0, 3.0, 1.0)],
        "s5:1->s7:3": [(9.0, 3000), (7.0, 7900)]}, {"s4:3->s1:2": (6.0, 0.7)}),
    # an earlier eBPF run (seed 3, trial 15, one time per switch; the link down was
    # s1:2-s4:3, both directions): s5:1->s7:3's last row came a second before the
    # WAN's last and s4:3->s1:2's, but their rows count from reads before it, so their
    # packets may have passed before it too; the break is s4:3->s1:2 (s1 was read
    # twice since: a whole round, s4 included, passed)
    "upstream rows that may predate the silence": ({
        "s4:3->s1:2": [(9.21, 1226), (5.21, 5025)],
        "s1:3->s5:3": [(7.21, 6043), (3.21, 140)],
        "s5:1->s7:3": [(6.21, 6232)],
        "s3:3->s1:1": [(9.21, 1326), (5.21, 5779), (1.21, 5), (-0.79, 1)],
        "s1:2->s4:3": [(7.21, 4902), (4.21, 1370)],
        "s7:3->s5:1": [(7.21, 6104), (3.21, 88)],
        "s5:3->s1:3": [(9.21, 1068), (5.21, 5337)]}, {"s4:3->s1:2": (5.2, 0.7)}),
    # the ring stopped and nothing was read after: no round, no verdict
    "nothing read after the hang": ({
        **_rounds([9.0, 7.0], OTHERS),
        "s4:3->s1:2": [(9.0, 3000), (7.0, 8000)],
        "s1:3->s5:3": [(9.0, 3000), (7.0, 5000)],
        "s5:1->s7:3": [(9.0, 3000), (7.0, 7900)]}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_dead_link_rule(case: str) -> None:
    rows, want = CASES[case]
    got = {k: (round(gap, 1), s) for k, (gap, s) in _dead(_hung_ring(rows)).items()}
    assert got == want


def test_kernel_sampler_rows_with_nothing_show_the_break() -> None:
    """Kernel routers' counters are sampled every interval, empty samples written: a
    link with rows of nothing while the link before it delivers is dead."""
    times = [9.0 - 0.2 * i for i in range(45)]
    rows = {ln: [(t, 3000 if t > 7.0 else 0) for t in times] for ln in PATH[1:4]}
    rows["s4:3->s1:2"] = [(t, 3000 if t > 7.0 else 2) for t in times]
    rows["s1:3->s5:3"] = [(t, 3000 if t > 7.0 else 2) for t in times]
    dead = _dead(_hung_ring(rows))
    assert list(dead) == ["s5:1->s7:3"] and dead["s5:1->s7:3"][1] == 0.95


def test_an_ecmp_path_the_pair_never_took_has_no_dead_link() -> None:
    """Without INT the pair's paths are every ECMP path; the spine the hash never chose
    wrote rows of nothing from the start (a CI run of the fault trials: s2's links,
    0 delivered in all 43 rows), while the path taken delivered: no link is dead
    (they outranked the injected fault before).  A link on the taken path that falls
    silent is still found."""
    used = {ln: [(9.0 - 0.5 * i, 3000) for i in range(18)] for ln in PATH[1:4]}
    idle = {ln: [(9.0 - 0.5 * i, 0) for i in range(18)]
            for ln in ("s4:4->s2:2", "s2:3->s6:3", "s6:1->s7:4")}
    ev = _hung_ring({**used, **idle})
    ev.telemetry.flows = []
    assert len(ev.pair_paths("h3", "h5")) == 2
    assert _dead(ev) == {}
    broken = {**used, "s5:1->s7:3": [(9.0 - 0.5 * i, 3000 if i < 6 else 0) for i in range(18)]}
    ev = _hung_ring({**broken, **idle})
    ev.telemetry.flows = []
    assert list(_dead(ev)) == ["s5:1->s7:3"]


@pytest.mark.parametrize("case", ["switch read early in a slow round",
                                  "next row not exported yet"])
def test_unread_silence_names_no_dead_link(case: str) -> None:
    """The whole diagnosis: no link_down where the rule finds none (the eBPF runs
    named one first, above the injected fault)."""
    d = diagnose(_hung_ring(CASES[case][0]))
    assert not any(c.kind == "link_down" and c.confidence >= 0.5 for c in d.culprits), [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits]


def test_loss_on_the_acks_path_is_no_slow_receiver() -> None:
    """eBPF run (seed 3, trial 10): congestion on s1:1->s3:3 lost 9.5 % there, and the
    pair it slowed was h1 -> h3, whose ACKs (h3 -> h1) cross it, not h7 -> h1, whose
    data does; the receiver h3 was named first, its paths "clean".  The ACKs' paths
    count as the pair's paths for that."""
    def crosses(seed: int) -> bool:
        return any(f.path[-2:-1] == ("s1:1->s3:3",) for f in
                   synth_ring(TOPO, RANKS, None, seed=seed).telemetry.flows)
    seed = next(s for s in range(1, 60) if crosses(s))
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="slow_receiver", target="h3", onset=0.6,
                                            delay_s=0.05), seed=seed)
    ev.telemetry.link_loss["s1:1->s3:3"] = [
        LossSample(t=s.t, lost=round(0.1 * s.delivered) if s.t >= T0 + 0.6 else 0,
                   delivered=s.delivered) for s in ev.telemetry.link_loss["s1:1->s3:3"]]
    d = diagnose(ev)
    assert d.culprits[0].key == "link s1:1->s3:3", [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]


def test_loss_into_a_rank_explains_its_own_sends_slowing() -> None:
    """eBPF run (seed 4, trials 22 and 28): a 3-6 % loss on the WAN into h5 slowed
    h3 -> h5 only 1.7x, below the flag, while h5 -> h7 was flagged 2x (h5's process,
    recovering the losses it received, sent late): h7 was named a slow receiver.  The
    rank's own sends count as the loss's pairs, and the loss into the sender of a
    host's slowed pairs counts as network evidence against that host."""
    def crosses(seed: int) -> bool:
        return any(f.path[:3] == PATH[:3] for f in
                   synth_ring(TOPO, RANKS, None, seed=seed).telemetry.flows)
    seed = next(s for s in range(1, 60) if crosses(s))
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="slow_receiver", target="h7", onset=0.6,
                                            delay_s=0.05, ack_delay_s=0.0), seed=seed)
    ev.telemetry.link_loss["s1:3->s5:3"] = [
        LossSample(t=s.t, lost=round(0.05 * s.delivered) if s.t >= T0 + 0.6 else 0,
                   delivered=s.delivered) for s in ev.telemetry.link_loss["s1:3->s5:3"]]
    d = diagnose(ev)
    assert d.slow_pairs == [(2, 3)]
    assert d.culprits[0].key == "link s1:3->s5:3", [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]
