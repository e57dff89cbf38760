"""Ranks culprits by joining the collective's slow transfers with telemetry and paths.

How: every component that could explain the slowdown is a candidate: each direction
of a link on the ranks' paths, each switch egress port feeding one, each host (as a
slow receiver) and each rank (as a straggler).  A candidate's *match* says how well
the set of rank pairs it lies under covers the set of slow pairs and nothing else
(an F1 score over pairs, ECMP paths weighted when telemetry did not say which one a
pair took).  Its *strength* says what the telemetry of that component shows after the
onset: loss on the link's sequence counters (gray loss; no delivery at all: link
down), a standing queue at the port with the port sending below its line rate (rate
degradation) or at line rate with foreign flows (congestion), flows losing packets at
a port whose link loses none (a tiny queue dropping), nothing at all on a clean path
while only transfers *into* one host slowed (a slow receiver), or a rank posting its
steps long after its input arrived (a straggler: the network cannot cause that).
confidence = match x strength; the list is sorted by it.  Nothing slow, nobody late
and no telemetry anomaly: "no fault".
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from controller.diagnose.arbitrate import arbitrate
from controller.diagnose.drops import host_drops, lost_in_switches
from controller.diagnose.evidence import Evidence, PortSample
from controller.diagnose.hang import COLLECTIVE_KINDS, HangView, analyse_hang
from controller.diagnose.rtt import held_share, recent_floors
from controller.diagnose.transfers import SLOW_RATIO, TransferView, analyse, pair_slowdowns
from controller.topology.model import Endpoint, LinkRole

__all__ = ["COLLECTIVE_KINDS", "Culprit", "Diagnosis", "diagnose"]
LOSS_RATE_MIN = 5e-3      # link loss rate that counts as loss ...
LOSS_RATE_MIN_INT = 2e-3  # ... where INT switches count each link's loss with sequence
                          # numbers (exact: 0.01-0.04 % on a loaded test bed, against
                          # 0.3-1 % from interface counters across user-space delay lines)
LOSS_NOISE_X = 3.0        # ... and this many times the next lossiest link's (the floor of
                          # a loaded test bed: user-space delay lines drop a little too)
LOSS_PKTS_MIN = 10
LOSS_STOPPED_PKTS = 2000  # delivered clean after the last lossy read: the loss stopped
NOISE_MIN_PKTS = 1000
QUEUE_HIGH_PKTS = 8       # standing queue (packets) that counts as a queue
FOREIGN_MIN = 1           # background flows that make a queue "congestion"
TELEMETRY_ONLY_LOSS = LOSS_RATE_MIN  # telemetry alone reports loss above this
TELEMETRY_ONLY_DROPS = 5   # ... or tail drops at a port without a standing queue
DROP_BINS_MIN = 3          # a tiny buffer drops a few packets at many bursts: in this
DROP_SPIKE_MAX = 0.5       # many sample intervals, none with more than this share of
                           # them (a deep queue overflowed by one huge burst - a stalled
                           # upstream releasing its backlog - loses dozens at once:
                           # a transient, no faulty port)
STANDING_MIN_N = 2        # a standing queue is seen in at least this many samples (INT
                          # samples a port about once a second; one burst fills one)
STANDING_SHARE = 0.4      # ... and in this share of the samples since the onset (0.3 let a
                          # Python switch's scheduling backlog, 5 of 16 samples at 3.7 of
                          # 100 Mbit/s, stand for congestion in a fault-free trial)
OWN_SENDS_SLOWED = 0.5    # a host's own sends slowed this much (0..1): it is slow itself
RTT_NOT_HELD = 0.4        # a slow receiver whose pairs' round trips show no hold (rtt.py)
RTT_HELD_ENOUGH = 0.5     # ... keeps this share of its strength, rising to all of it here
STALL_WINDOW_S = 0.3      # queues at two ports of one switch this close are together
STALL_SHARE = 0.5         # a port queued together with another of its switch's ports in
                          # this share of its queued samples: the switch stalled, not the link
MIN_CONFIDENCE = 0.3       # weaker candidates are not reported (cannot be told apart)
FLOW_LOSS_ONLY = 0.25     # flows lost packets somewhere in a switch on the path, nothing
                          # else: below the report floor even with every pair under it (a
                          # Python switch on a loaded machine drops a few now and then:
                          # 13 PSN gaps named a fault in a fault-free trial)
SILENT_S = 1.0            # a link silent this long under a hung transfer is down
ROUND_MIN_SWITCHES = 3    # a time with rows from this many switches is a read round ...
ROUND_SHARE = 0.3         # ... when this share of the times are (one time per round)


@dataclass(slots=True)
class Culprit:
    component: str          # "s1:3->s5:3", "s3:2", "h5", "2"
    type: str               # link | port | host | rank
    kind: str               # one of common.faults.FAULT_KINDS
    confidence: float
    onset: float | None
    evidence: dict = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.type} {self.component}"

    def as_dict(self) -> dict:
        return {"component": self.component, "type": self.type, "kind": self.kind,
                "confidence": round(self.confidence, 3), "onset": self.onset,
                "evidence": self.evidence}


@dataclass(slots=True)
class Diagnosis:
    culprits: list[Culprit]
    at: float
    transfers: int
    slow_pairs: list[tuple[int, int]]
    late_ranks: list[int]
    view: TransferView | None = None
    collective: dict = field(default_factory=dict)   # hang / mismatch findings per comm

    @property
    def fault(self) -> bool:
        return bool(self.culprits)

    def as_dict(self) -> dict:
        return {"fault": self.fault, "at": self.at, "transfers": self.transfers,
                "slow_pairs": [list(p) for p in self.slow_pairs],
                "late_ranks": self.late_ranks, "collective": self.collective,
                "culprits": [c.as_dict() for c in self.culprits]}


# -- telemetry features -------------------------------------------------------------
@dataclass(slots=True)
class _LinkTel:
    loss_rate: float = 0.0
    lost: int = 0
    delivered_after: int = 0
    delivered_before: int = 0
    qmax: int = 0
    qbase: float = 0.0
    tx_ratio: float | None = None      # measured tx rate / line rate while queued
    queued_share: float = 0.0          # share of the samples since onset with a queue
    queued_n: int = 0
    stalled_share: float = 0.0         # share of the queued samples with the whole switch queued
    foreign: int = 0
    flow_lost: int = 0
    drops: int = 0                     # tail drops at the port feeding the link
    drop_bins: int = 0                 # sample intervals since the onset with drops
    drop_spike: float = 0.0            # the largest one's share of the drops
    qsize: int | None = None           # the least the port's queue could hold since then
    clean_after: int = 0               # packets delivered since the last lossy read
    last_delivery: float | None = None
    silent_s: float = 0.0              # silent while the link before it still delivered
    dead_strength: float = 0.0
    onset: float | None = None


def _port_features(samples: list[PortSample], t_on: float, tel: _LinkTel) -> None:
    # the queue before: low percentile of what came before the onset (the onset seen in
    # the collective can lag the fault by a window), else the least of the first samples
    before = [s.qlen_pkts for s in samples if s.t < t_on]
    after = [s for s in samples if s.t >= t_on]
    tel.qbase = (float(np.percentile(before, 20)) if len(before) >= 3
                 else float(min(s.qlen_pkts for s in samples[:3])) if samples else 0.0)
    if not after:
        return
    tel.qmax = max(s.qlen_pkts for s in after)
    queued = [s for s in after if s.qlen_pkts >= QUEUE_HIGH_PKTS]
    tel.queued_n, tel.queued_share = len(queued), len(queued) / len(after)
    ratios = [s.tx_rate_bps / s.line_rate_bps for s in queued
              if s.tx_rate_bps and s.line_rate_bps]
    if ratios:
        tel.tx_ratio = float(np.median(ratios))
    high = max(QUEUE_HIGH_PKTS, 2 * tel.qbase + 4)
    first = next((i for i, s in enumerate(samples) if s.qlen_pkts >= high), None)
    if queued and first is not None:
        tel.onset = samples[first - 1].t if first > 0 else samples[first].t


def _link_features(ev: Evidence, link: str, port: tuple[str, int] | None, t_on: float,
                   rank_ips: set[str]) -> _LinkTel:
    tel = _LinkTel()
    prev_t = None
    for s in ev.telemetry.link_loss.get(link, []):
        if s.t >= t_on:
            tel.lost += s.lost
            tel.delivered_after += s.delivered
        else:
            tel.delivered_before += s.delivered
        if s.lost and tel.onset is None:   # the loss began in this sample's bin
            tel.onset = prev_t if prev_t is not None else s.t
        prev_t = s.t
        if s.delivered > 0:
            tel.last_delivery = s.t
    if tel.lost + tel.delivered_after:
        tel.loss_rate = tel.lost / (tel.lost + tel.delivered_after)
    reads = [s for s in ev.telemetry.link_loss.get(link, []) if s.t >= t_on]
    lossy = [i for i, s in enumerate(reads)
             if s.lost >= LOSS_PKTS_MIN and s.lost >= LOSS_RATE_MIN_INT * (s.lost + s.delivered)]
    if lossy:
        rest = reads[lossy[-1] + 1:]
        if sum(s.lost for s in rest) < LOSS_RATE_MIN_INT * max(1, sum(s.delivered for s in rest)):
            tel.clean_after = sum(s.delivered for s in rest)
    if port is not None:
        _port_features(ev.telemetry.ports.get(port, []), t_on, tel)
        sizes = [n for t, n in ev.telemetry.port_sizes.get(port, []) if t >= t_on]
        tel.qsize = min(sizes) if sizes else None
        drops = ev.telemetry.port_drops.get(port, [])
        before = [n for t, n in drops if t < t_on]
        after = [(t, n) for t, n in drops if t >= t_on]
        if after:
            tel.drops = after[-1][1] - (before[-1] if before else after[0][1] if
                                        len(after) == 1 else 0)
            grew = [drops[i][1] - drops[i - 1][1] for i in range(1, len(drops))
                    if drops[i][0] >= t_on and drops[i][1] > drops[i - 1][1]]
            if grew:
                tel.drop_bins, tel.drop_spike = len(grew), max(grew) / sum(grew)
            base = drops[0][1]
            i = next((i for i, (_t, n) in enumerate(drops) if n > base), None)
            if tel.drops > 0 and i is not None:
                first = drops[i - 1][0] if i > 0 else drops[i][0]
                tel.onset = first if tel.onset is None else min(tel.onset, first)
    foreign = set()
    for f in ev.telemetry.flows:
        if link in f.path:
            if f.src not in rank_ips or f.dst not in rank_ips:
                foreign.add((f.src, f.dst, f.qp))
            elif f.t >= t_on:
                tel.flow_lost = max(tel.flow_lost, f.lost)
    tel.foreign = len(foreign)
    return tel


def _link_kind(tel: _LinkTel, hung: bool, loss_floor: float = 0.0,
               loss_min: float = LOSS_RATE_MIN, stalled: bool | None = None
               ) -> tuple[str, float, dict]:
    """(kind, strength 0..1, evidence) of one link direction from its telemetry
    (``stalled``: a pair on it has a transfer stalled, if not yet hung; None: ``hung``)."""
    stalled = hung if stalled is None else stalled or hung
    if tel.lost >= LOSS_PKTS_MIN and tel.loss_rate >= max(loss_min, loss_floor):
        if tel.delivered_after == 0:
            return "link_down", 1.0, {"lost": tel.lost, "delivered": 0}
        if tel.clean_after >= LOSS_STOPPED_PKTS:
            # a burst lost once, then the link carried thousands without loss: a faulty
            # link keeps losing at its rate (on the test bed: a go-back-N burst overflowing
            # a leaf's ingress after the WAN, e.g. the bursts a slow receiver makes)
            return "gray_loss", 0.3, {"loss_rate": round(tel.loss_rate, 5), "lost": tel.lost,
                                      "clean_since_pkts": tel.clean_after}
        s = min(1.0, 0.6 + tel.loss_rate / LOSS_RATE_MIN)
        return "gray_loss", s, {"loss_rate": round(tel.loss_rate, 5), "lost": tel.lost,
                                "delivered": tel.delivered_after}
    if stalled and tel.silent_s >= SILENT_S:
        return "link_down", tel.dead_strength, {
            "silent_while_upstream_delivered_s": round(tel.silent_s, 3),
            "last_delivery": tel.last_delivery}
    # (the wire after the port may lose a little on a loaded test bed: the port's own
    # tail drops are counted before the wire, so that loss neither hides nor makes them)
    if tel.drops > 0 and tel.qmax < QUEUE_HIGH_PKTS and _persistent_drops(tel):
        return "tiny_queue", 0.9, {"tail_drops": tel.drops, "link_lost": tel.lost,
                                   "queue_max_pkts": tel.qmax, "flow_psn_lost": tel.flow_lost,
                                   "drop_intervals": tel.drop_bins,
                                   "largest_drop_share": round(tel.drop_spike, 2)}
    if tel.qmax >= QUEUE_HIGH_PKTS and tel.qmax >= 2 * tel.qbase + 4:
        q = {"queue_max_pkts": tel.qmax, "queue_before_pkts": tel.qbase,
             "tx_over_line_rate": tel.tx_ratio, "foreign_flows": tel.foreign}
        if tel.queued_n < STANDING_MIN_N or tel.queued_share < STANDING_SHARE:
            # a burst passing now and then, not a standing queue
            return "congestion", 0.2, {**q, "queued_samples": tel.queued_n,
                                       "queued_share": round(tel.queued_share, 2)}
        if _stalled(tel):   # the switch's process stood still: every port queued at once
            return "rate_degraded", 0.2, {**q, "switch_stalled_share":
                                          round(tel.stalled_share, 2)}
        if tel.tx_ratio is not None:   # the port's own rate says which
            if tel.tx_ratio < 0.8:
                return "rate_degraded", 0.9, q
            return "congestion", 0.9 if tel.foreign >= FOREIGN_MIN else 0.85, q
        return ("congestion" if tel.foreign >= FOREIGN_MIN else "rate_degraded"), 0.6, q
    if tel.flow_lost > 0:  # lost inside a switch on the path, which one unknown
        return "tiny_queue", FLOW_LOSS_ONLY, {"flow_psn_lost": tel.flow_lost, "link_lost": tel.lost,
                                   "queue_max_pkts": tel.qmax}
    if hung:
        return "link_down", 0.3, {"hung_transfers": True}
    return "rate_degraded", 0.15, {"telemetry": "none on this link"}


def _stalled(tel: _LinkTel) -> bool:
    return tel.queued_n > 0 and tel.stalled_share >= STALL_SHARE


def _switch_wide(ev: Evidence, port: tuple[str, int], t_on: float) -> float:
    """Share of ``port``'s queued samples since ``t_on`` at which another egress port
    of the same switch queued too (within ``STALL_WINDOW_S``).

    Why: a link that is slow or full backs up the one port feeding it; a switch whose
    process stops forwarding for a while (a software switch on a loaded machine) backs
    up every port that has traffic at once, and then sends each of them far below its
    line rate, which one port's telemetry alone would call a degraded link."""
    sw, p = port
    mine = [s.t for s in ev.telemetry.ports.get(port, [])
            if s.t >= t_on and s.qlen_pkts >= QUEUE_HIGH_PKTS]
    if not mine:
        return 0.0
    others = sorted(s.t for (o_sw, o_p), ss in ev.telemetry.ports.items()
                    if o_sw == sw and o_p != p for s in ss if s.qlen_pkts >= QUEUE_HIGH_PKTS)
    if not others:
        return 0.0
    arr = np.asarray(others)
    together = 0
    for t in mine:
        i = int(np.searchsorted(arr, t))
        near = [abs(arr[j] - t) for j in (i - 1, i) if 0 <= j < len(arr)]
        together += bool(near) and min(near) <= STALL_WINDOW_S
    return together / len(mine)


def _persistent_drops(tel: _LinkTel) -> bool:
    """Whether the port's tail drops recur, a few at a time, as a buffer too small for
    the traffic's bursts makes them, rather than come in one or two spikes.

    A queue that could hold a standing queue's worth of packets all along (its size
    as the switch reports it) was not too small: it overflowed under a burst larger
    than it (on the Python target: what its receive socket held while the machine
    did not run the switch, handed to the queue at once), which is no fault of the
    port."""
    if tel.qsize is not None and tel.qsize >= QUEUE_HIGH_PKTS:
        return False
    return tel.drop_bins >= DROP_BINS_MIN and tel.drop_spike <= DROP_SPIKE_MAX


def _loss_rates(ev: Evidence, t_on: float) -> dict[str, float]:
    """Loss rate of every link since ``t_on`` (links that carried something)."""
    out = {}
    for link, ss in ev.telemetry.link_loss.items():
        lost = sum(s.lost for s in ss if s.t >= t_on)
        n = lost + sum(s.delivered for s in ss if s.t >= t_on)
        if n >= NOISE_MIN_PKTS:   # (a few packets make no floor: 1 of 50 is not 2 %)
            out[link] = lost / n
    return out


def _next_loss_rate(rates: dict[str, float], link: str) -> float:
    """The highest loss rate of the *other* links: the noise floor this one must beat."""
    return max((r for k, r in rates.items() if k != link), default=0.0)


def _last_delivery(ev: Evidence, link: str) -> float | None:
    ts = [s.t for s in ev.telemetry.link_loss.get(link, []) if s.delivered > 0]
    return max(ts) if ts else None


def _receiver(link: str) -> str:
    """The switch (or host) that counts a directed link's deliveries: its far end."""
    return link.split("->")[1].split(":")[0]


@dataclass(slots=True)
class _Reads:
    """When each receiving switch's link counters were read, as far as the exported
    rows show it.

    Why: a link's rows say what it delivered *since its previous read*, and a read
    that found nothing writes no row (the controller leaves empty cells out) - so a
    link's missing rows after its last delivery prove silence only where the switch
    is known to have been read.  It is, at a time when another link into the same
    switch has a row (its counters are read together), and, where the controller
    reads every switch in one round with one time (``controller/runner/links.py``;
    the kernel routers' sampler does too: most times have rows from several
    switches), at any time with rows.
    Older exports carry one time per switch: a link read last in a slow round looked
    dead beside links read seconds later (the eBPF runs' false dead links); there, two
    reads of any other switch since say a whole round, this switch included, passed."""

    by_switch: dict[str, list[float]]
    rounds: list[float]

    @classmethod
    def of(cls, ev: Evidence) -> _Reads:
        at: dict[float, set[str]] = defaultdict(set)
        by_switch: dict[str, set[float]] = defaultdict(set)
        for link, ss in ev.telemetry.link_loss.items():
            for s in ss:
                at[s.t].add(_receiver(link))
                by_switch[_receiver(link)].add(s.t)
        wide = [t for t, sws in at.items() if len(sws) >= ROUND_MIN_SWITCHES]
        # (in rounds, a time with one switch's rows read the others too: they were silent)
        rounds = sorted(at) if at and len(wide) >= ROUND_SHARE * len(at) else []
        return cls(by_switch={k: sorted(v) for k, v in by_switch.items()}, rounds=rounds)

    def _known(self, link: str, keep: Callable[[float], bool]) -> list[float]:
        """Times ``keep`` accepts at which ``link``'s counters are known to have been
        read: its switch's rows, the rounds, and, for every other switch read twice
        among them, the earlier of its last two reads (a whole round lies between, which
        read this switch too)."""
        ts = [t for t in self.by_switch.get(_receiver(link), []) if keep(t)]
        ts += [t for t in self.rounds if keep(t)]
        for sw, times in self.by_switch.items():
            kept = [t for t in times if keep(t)]
            if sw != _receiver(link) and len(kept) >= 2:
                ts.append(kept[-2])
        return ts

    def last_read(self, link: str, after: float) -> float | None:
        """The latest time by which ``link``'s counters are known to have been read
        again after ``after`` (None: not known to be)."""
        ts = self._known(link, lambda t: t > after)
        return max(ts) if ts else None

    def read_before(self, link: str, t: float) -> float | None:
        """The latest time ``link``'s counters are known to have been read before
        ``t``: its row at ``t`` counts what it delivered after that."""
        ts = self._known(link, lambda x: x < t)
        return max(ts) if ts else None


def _both_ways_silent(ev: Evidence, link: str, reads: _Reads) -> bool:
    """Whether ``link``'s reverse direction, too, delivered nothing at the latest read
    that found ``link`` silent (a link down stops both; nothing known: silent)."""
    a, _, b = link.partition("->")
    back = _last_delivery(ev, f"{b}->{a}")
    mine = _last_delivery(ev, link)
    seen = reads.last_read(link, mine if mine is not None else -np.inf)
    return back is None or (seen is not None and back < seen)



def _paths_taken(ev: Evidence, paths: list[tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The ECMP paths whose every read link delivered something in the trial (all of
    them when none did).

    Why: a path the hash never chose carries nothing before the fault either, and
    its links' empty rows read as silence while the links before them deliver: an
    idle spine's links outranked the injected fault (a port at a twentieth of its
    rate) as dead links in a CI run of the fault trials.  A link that fails at the
    onset delivered before it, so its path stays.
    """
    taken = [p for p in paths if all(link not in ev.telemetry.link_loss
                                     or _last_delivery(ev, link) is not None for link in p)]
    return taken or paths


def _dead_links(ev: Evidence, view: TransferView, hosts: dict[int, str],
                hung: set[tuple[int, int]]) -> dict[str, tuple[float, float]]:
    """Links that were read and found silent while the link before them on a hung
    pair's path still delivered (the sender's retransmissions reach the break and go
    no further).

    Why relative to the link before: when a collective hangs, every link falls silent
    (nothing is sent), and when the ranks stop, so does everything else; only the
    retransmissions of the hung transfer keep the links *before* the break busy.  The
    sender's own access link counts as delivering (the log says the transfer is
    outstanding) but weighs less than a measured one.  Silence counts only up to the
    link's last known read (``_Reads``): rows not yet exported, or a switch not yet
    read in a slow round, say nothing.  -> {link: (silent s, strength)}
    """
    out: dict[str, tuple[float, float]] = {}
    reads = _Reads.of(ev)
    t_first = min((s.t for ss in ev.telemetry.link_loss.values() for s in ss), default=0.0)
    for a, b in hung:
        if a not in hosts or b not in hosts:
            continue
        for path in _paths_taken(ev, ev.pair_paths(hosts[a], hosts[b])):
            # the pair's packets reach the next link after ``p_from`` for certain (each
            # link before it delivered after then: its last delivering row counts from
            # its previous read on) and up to ``p_to`` (the least of their last rows):
            # the sender's outstanding transfer, then every link they crossed (a link
            # after the break may stay busy with other pairs' traffic: it delivers
            # none of this pair's, and the break before it already bounds ``p_from``)
            p_from = p_to = -np.inf
            started = measured = False
            # the break is where the silence begins: the largest gap between a link's
            # last delivery and the one before it (a sender's retransmission timer
            # backs off, so the links before the break can pause for a second too)
            best: tuple[bool, float, float, str] | None = None
            for i, link in enumerate(path):
                if link not in ev.telemetry.link_loss:
                    if i == 0:   # the sender's access link: outstanding transfer
                        p_from = p_to = view.t1
                        started = True
                    continue
                last = _last_delivery(ev, link)
                since = last if last is not None else t_first
                read = reads.last_read(link, since)
                if read is not None and p_from >= since:
                    gap = min(p_to, read) - since
                    if gap >= SILENT_S:
                        cand = (measured, gap, 0.95 if measured else 0.7, link)
                        if best is None or cand[:2] > best[:2]:
                            best = cand
                if last is None:      # nothing passed it: nothing is known after it
                    p_from = p_to = -np.inf
                    started = True
                    continue
                start = reads.read_before(link, last)
                start = -np.inf if start is None else start
                p_from, p_to = (min(p_from, start), min(p_to, last)) if started else (start, last)
                started = measured = True
            if best is not None:
                _m, gap, strength, link = best
                if out.get(link, (0.0, 0.0))[1] < strength:
                    out[link] = (gap, strength)
    return out


# -- pair matching ------------------------------------------------------------------
def _f1(weights: dict[tuple[int, int], float], bad: set[tuple[int, int]],
        active: set[tuple[int, int]]) -> float:
    tp = sum(weights.get(p, 0.0) for p in bad)
    fn = sum(1.0 - weights.get(p, 0.0) for p in bad)
    fp = sum(weights.get(p, 0.0) for p in active - bad)
    if tp == 0:
        return 0.0
    return 2 * tp / (2 * tp + fp + fn)


def _slowed_shares(ev: Evidence, bad: set[tuple[int, int]], t_on: float
                   ) -> dict[tuple[int, int], float]:
    """Pair -> how far it slowed since ``t_on``, 0..1 (1: flagged slow or hung, or
    ``SLOW_RATIO`` times its time before)."""
    out = {p: min(1.0, max(0.0, (r - 1.0) / (SLOW_RATIO - 1.0)))
           for p, r in pair_slowdowns(ev.records, t_on).items()}
    out.update({p: 1.0 for p in bad})
    return out


def _pairs_and_next(w: dict[tuple[int, int], float], active: set[tuple[int, int]]
                    ) -> set[tuple[int, int]]:
    """The pairs mostly on a link (weight >= 0.5) and the pairs their receivers send."""
    mine = {p for p, x in w.items() if x >= 0.5}
    return mine | {q for q in active if any(q[0] == p[1] for p in mine)}


def _soft_f1(slowed: dict[tuple[int, int], float], mine: set[tuple[int, int]],
             active: set[tuple[int, int]]) -> float:
    """F1 of "the pairs at this host slowed, the others did not", with each pair's
    slowdown as a share instead of a flag."""
    tp = sum(slowed.get(p, 0.0) for p in mine)
    fn = sum(1.0 - slowed.get(p, 0.0) for p in mine)
    fp = sum(slowed.get(p, 0.0) for p in active - mine)
    return 2 * tp / (2 * tp + fp + fn) if tp > 0 else 0.0


def diagnose(ev: Evidence) -> Diagnosis:
    """Rank the culprits of whatever slowed the collective in ``ev`` (or say none)."""
    now = ev.end_time
    view = analyse(ev.records, now)
    hosts = ev.rank_hosts()
    rank_ips = {h.ipv4 for h in ev.topo.hosts if h.name in hosts.values()}
    bad = view.bad_pairs
    active = set(view.pairs)
    onset = view.onset
    t_on = onset if onset is not None else view.t0 + 0.5 * max(0.0, now - view.t0)
    out: list[Culprit] = []
    # which directed links each active pair crosses (weight: share of its ECMP paths)
    link_w: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    link_pos: dict[str, int] = {}   # hop index on the paths (upstream first)
    int_seen = {(f.src, f.dst) for f in ev.telemetry.flows if f.path}
    ip = {h.name: h.ipv4 for h in ev.topo.hosts}
    for (a, b) in active:
        if a not in hosts or b not in hosts:
            continue
        ps = ev.pair_paths(hosts[a], hosts[b])
        for p in ps:
            for i, ln in enumerate(p):
                link_w[ln][(a, b)] = link_w[ln].get((a, b), 0.0) + 1.0 / len(ps)
                link_pos[ln] = min(link_pos.get(ln, i), i)
    hung_pairs = {k for k, p in view.pairs.items() if p.hung}
    # a dead link is looked for under transfers stalled for a few baselines: hung (10x)
    # comes 10-20 s after the onset on the Python target's 1-2 s transfers
    stalled_pairs = view.stalled_pairs | hung_pairs
    retx_bad = sum(view.pairs[p].retx for p in bad)
    n_bad = sum(view.pairs[p].bad for p in bad)
    roles: dict[str, tuple[LinkRole | None, Endpoint | None]] = {}
    for tl in ev.topo.links:
        for end_a, end_b in ((tl.a, tl.b), (tl.b, tl.a)):
            roles[f"{end_a}->{end_b}"] = (tl.role, end_a)
    dead = _dead_links(ev, view, hosts, hung_pairs)
    # ... and under transfers only stalled so far, where both directions fell silent
    # (a slow receiver stalls its senders too, with the link into it silent between
    # their retransmission timeouts, but its own ACKs and sends still come back)
    for link, found in _dead_links(ev, view, hosts, stalled_pairs - hung_pairs).items():
        if link not in dead and _both_ways_silent(ev, link, _Reads.of(ev)):
            dead[link] = found
    slowed_all = _slowed_shares(ev, bad, t_on)
    loss_rates = _loss_rates(ev, t_on - 0.5)
    link_strength: dict[str, float] = {}
    queued_into: dict[str, str] = {}   # host -> the access link into it that queues
    for link, w in link_w.items():
        role, near = roles.get(link, (None, None))
        port = (near.node, near.port) if near is not None and any(
            s.name == near.node for s in ev.topo.switches) else None
        tel = _link_features(ev, link, port, t_on - 0.5, rank_ips)
        if port is not None:
            tel.stalled_share = _switch_wide(ev, port, t_on - 0.5)
        if link in dead:
            tel.silent_s, tel.dead_strength = dead[link]
        # (a stalled transfer over a dead link is as slow as a flagged one)
        match = _f1(w, bad | stalled_pairs if link in dead else bad, active)
        # ... counting slowdowns below the flag, and the pairs the receivers under it
        # send on (a rank recovering losses it receives sends late itself: a 6 % loss
        # on h3 -> h5 slowed that pair 1.7x and flagged h5 -> h7 2x)
        soft_match = _soft_f1(slowed_all, _pairs_and_next(w, active), active)
        kind, strength, evid = _link_kind(tel, bool(hung_pairs & set(w)),
                                          LOSS_NOISE_X * _next_loss_rate(loss_rates, link),
                                          LOSS_RATE_MIN_INT if int_seen else LOSS_RATE_MIN,
                                          stalled=bool(stalled_pairs & set(w)))
        link_strength[link] = strength if strength >= 0.5 else 0.0
        if role == LinkRole.HOST and kind in ("rate_degraded", "congestion") \
                and port is not None:
            queued_into[link.split("->")[1].split(":")[0]] = link
        # a telemetry anomaly is a candidate by itself; slow pairs under it confirm it
        anomaly = ((kind in ("gray_loss", "link_down") and strength >= 0.5)
                   or (tel.drops >= TELEMETRY_ONLY_DROPS and tel.qmax < QUEUE_HIGH_PKTS
                       and _persistent_drops(tel))
                   or (tel.queued_n >= 4 and tel.queued_share >= 0.5
                       and tel.qmax >= 2 * tel.qbase + 4 and not _stalled(tel))
                   or (kind == "link_down" and strength >= 0.9))
        if match == 0 and not anomaly:
            continue
        if anomaly and strength >= 0.5:
            match = 0.5 + 0.5 * max(match, soft_match)
        if kind == "tiny_queue" and port is not None:
            comp, ctype = f"{port[0]}:{port[1]}", "port"
        else:
            comp, ctype = link, "link"
        pairs_hit = sorted(p for p in bad if w.get(p, 0) > 0)
        # which pairs' paths INT recorded (else the pair is weighed over its ECMP paths)
        on_int = sum((ip.get(hosts.get(a, "")), ip.get(hosts.get(b, ""))) in int_seen
                     for a, b in w)
        evid.update({"slow_pairs_on_it": [list(p) for p in pairs_hit],
                     "pairs_on_it": len(w), "int_paths_on_it": on_int,
                     "match": round(match, 3),
                     "role": str(role) if role else None,
                     "retx_on_slow_transfers": retx_bad})
        conf = match * strength
        if kind == "link_down":
            # links after a dead one fall silent too; the first silent one is the culprit
            conf *= 1.0 - 0.02 * link_pos.get(link, 0)
        if role == LinkRole.HOST and kind in ("rate_degraded",) and strength < 0.5:
            conf *= 0.9  # an access link with no telemetry: the host ranks above it
        t_kind = tel.onset
        c_on = min((fb for p in pairs_hit if (fb := view.pairs[p].first_bad) is not None),
                   default=None)
        known = [x for x in (t_kind, c_on, onset) if x is not None]
        on = min(known) if known else None
        out.append(Culprit(component=comp, type=ctype, kind=kind, confidence=conf,
                           onset=on, evidence=evid))
    # slow receiver: only transfers into one host slowed, and their paths are clean;
    # or the round trips of every pair into it and out of it lifted (rtt.py)
    floors = recent_floors(ev.records, t_on)
    if bad or floors.recent:
        slowed = _slowed_shares(ev, bad, t_on) if bad else {}
        for h in sorted(set(hosts.values())):
            # a slow host receives late: data into it, and the ACKs of its own sends
            # (receiving counts most: a slow receiver is what this candidate stands for)
            w = {p: 1.0 if hosts.get(p[1]) == h else 0.5 for p in active
                 if h in (hosts.get(p[1]), hosts.get(p[0]))}
            held = held_share(floors, {p for p in w if hosts.get(p[1]) == h},
                              {p for p in w if hosts.get(p[0]) == h}, active)
            match = max(_f1(w, bad, active) if bad else 0.0, held or 0.0)
            if match == 0:
                continue
            # ... or both pairs at it slowed, one maybe below the flag: the host between
            # them, not the one at the far end of the flagged pair
            soft = _soft_f1(slowed, set(w), active)
            match = max(match, soft)
            on_paths = {ln for ln, lw in link_w.items() if any(p in lw for p in bad & set(w))}
            # the queue at the port into it is what a slow receiver makes when its own
            # sends slowed too (its ACKs wait): a slow access link slows data into it only
            own = max((slowed.get(p, 0.0) for p in active if hosts.get(p[0]) == h),
                      default=0.0)
            mine_q = queued_into.get(h) if own >= OWN_SENDS_SLOWED else None
            net = max((link_strength.get(ln, 0.0) for ln in on_paths if ln != mine_q),
                      default=0.0)
            # ... and on the paths of their ACKs (a loss or queue there slows the sender
            # as much; weighed by the share of the ECMP paths they may take)
            net = max(net, _ack_path_strength(ev, hosts, bad & set(w), link_strength, mine_q))
            # ... and on the paths into the senders of its slowed pairs (the sender was
            # busy recovering the losses it received: see soft_match above)
            senders = {p[0] for p in bad & set(w)}
            net = max([net] + [link_strength.get(ln, 0.0) for ln, lw in link_w.items()
                               if ln != mine_q and any(p[1] in senders for p in lw)])
            retx_per = retx_bad / max(1, n_bad)
            # the losses the switches and the host counted themselves (no link counter
            # sees them): slow transfers that resent what the switches on their paths
            # dropped were slowed by the network, unless the host dropped packets on
            # its own full sockets too (then it lost them itself)
            lossy, in_switches, own_drops = _drops_at_host(ev, view, hosts, h,
                                                           bad & set(w), t_on, now)
            if lossy and not own_drops:
                net = max(net, in_switches / lossy)
            # (retransmissions do not count against it: timeouts of a loaded machine
            # make them in fault-free runs too)
            # A slow receiver processes every packet it receives late, the ACKs of its
            # own sends too: the data into it and its own sends slow together.  One of
            # them alone is what a slow path or a slow peer makes as well (one pair
            # into a host, 2x slower on a loaded Python test bed, named it with its own
            # sends on time; the sender of that pair, its own sends slowed, with the
            # data into it on time): then a quarter of the evidence is left
            into = max((slowed.get(p, 0.0) for p in active if hosts.get(p[1]) == h),
                       default=0.0)
            # (both lifted round trips say it as well: a hold shows there even where
            # transfer times vary as much without one; and where the round trips could
            # tell and show little or nothing held, the transfer times' case weighs less)
            both = max(min(into, own), held or 0.0)
            strength = 0.9 * (1.0 - net) * (1.0 + 3.0 * both) / 4
            if held is not None and held < RTT_HELD_ENOUGH:
                strength *= RTT_NOT_HELD + (1 - RTT_NOT_HELD) * held / RTT_HELD_ENOUGH
            if hung_pairs & set(w):
                strength *= 0.5
            c_on = min((view.pairs[p].first_bad or now for p in bad & set(w)), default=now)
            ranks = sorted(r for r, hh in hosts.items() if hh == h)
            out.append(Culprit(
                component=h, type="host", kind="slow_receiver", confidence=match * strength,
                onset=c_on, evidence={"ranks": ranks, "slow_pairs_at_it":
                                      [list(p) for p in sorted(bad & set(w))],
                                      "match": round(match, 3),
                                      "pairs_at_it_slowed": round(soft, 3),
                                      "own_sends_slowed": round(own, 3),
                                      "data_into_it_slowed": round(into, 3),
                                      "queue_into_it": mine_q,
                                      "network_evidence_on_paths": round(net, 3),
                                      "retx_per_slow_transfer": round(retx_per, 2),
                                      "slow_transfers": lossy,
                                      "slowed_by_switch_drops": in_switches,
                                      "receiver_socket_drops": own_drops,
                                      "rtt_held": None if held is None else round(held, 3)}))
    # stragglers: ranks that post steps late although their input had arrived
    total_late = sum(len(v) for v in view.late.values())
    for rank, ev_late in sorted(view.late.items()):
        share = len(ev_late) / total_late
        gap = float(np.median([g for _, g in ev_late]))
        strength = min(1.0, 0.7 + gap)
        out.append(Culprit(
            component=str(rank), type="rank", kind="straggler", confidence=share * strength,
            onset=min(t for t, _ in ev_late),
            evidence={"late_steps": len(ev_late), "median_late_s": round(gap, 4),
                      "host": hosts.get(rank)}))
    hang = analyse_hang(ev)
    out += _peer_links(ev, hang, t_on, rank_ips)
    out = arbitrate([c for c in out if c.confidence >= MIN_CONFIDENCE],
                    bool(hung_pairs) or bool(dead))
    out = _hang_first(out, [c for c in hang.culprits if c.confidence >= MIN_CONFIDENCE])
    return Diagnosis(culprits=out, at=now, transfers=view.n_transfers,
                     slow_pairs=sorted(bad), late_ranks=sorted(view.late), view=view,
                     collective=hang.summary)


def _drops_at_host(ev: Evidence, view: TransferView, hosts: dict[int, str], host: str,
                   pairs: set[tuple[int, int]], t_on: float, now: float
                   ) -> tuple[int, int, int]:
    """(slow transfers of ``pairs`` since ``t_on``, those of them that resent packets
    the switches on their paths dropped, datagrams ``host`` dropped on its own full
    sockets) for the slow-receiver candidate ``host``.

    Why: a Python switch the machine did not run for a while hands its receive
    socket's backlog to a queue at once and tail-drops what does not fit; the pairs
    through it resend and slow down as if their receiver were slow, with nothing in
    the link counters (the drop comes before egress stamps the link sequence number)."""
    slow: dict[tuple[int, int], list[tuple[float, float, int]]] = defaultdict(list)
    for r in ev.records:
        p = (r.rank, r.peer)
        if r.dir != "send" or p not in pairs or r.end is None or r.start < t_on:
            continue
        base = view.pairs[p].baseline_s if p in view.pairs else 0.0
        if base > 0 and r.end - r.start >= SLOW_RATIO * base:
            slow[p].append((r.start, r.end, r.retx))
    n_switch = 0
    for (a, b), transfers in slow.items():
        if a in hosts and b in hosts:
            n_switch += lost_in_switches(ev.telemetry, transfers,
                                         ev.pair_paths(hosts[a], hosts[b]),
                                         ev.pair_paths(hosts[b], hosts[a]))
    n_slow = sum(len(v) for v in slow.values())
    return n_slow, n_switch, host_drops(ev.telemetry, host, t_on - 0.5, now)


def _ack_path_strength(ev: Evidence, hosts: dict[int, str], pairs: set[tuple[int, int]],
                       link_strength: dict[str, float], mine: str | None) -> float:
    """The strongest link evidence on the ACK paths of ``pairs`` (receiver -> sender),
    each link's strength times the share of the pair's paths crossing it (``mine``:
    the queue into the host itself, its own symptom, left out)."""
    best = 0.0
    for a, b in pairs:
        if a not in hosts or b not in hosts:
            continue
        ps = ev.pair_paths(hosts[b], hosts[a])
        for ln, strength in link_strength.items():
            if strength > best and ln != mine:
                share = sum(ln in p for p in ps) / len(ps) if ps else 0.0
                best = max(best, strength * share)
    return best


def _topo_host(ev: Evidence, name: str) -> str | None:
    """The topology host an address or host name from a log stands for."""
    for h in ev.topo.hosts:
        if name in (h.name, h.ipv4):
            return h.name
    return None


def _peer_links(ev: Evidence, hang: HangView, t_on: float, rank_ips: set[str]
                ) -> list[Culprit]:
    """Links between two hosts a NET/socket error names whose telemetry shows a fault
    (the error says which pair; the telemetry says which link of its path)."""
    out: list[Culprit] = []
    for pe in hang.peer_errors:
        a, b = _topo_host(ev, pe.host), _topo_host(ev, pe.peer)
        if a is None or b is None or a == b:
            continue
        links = {ln for src, dst in ((a, b), (b, a)) for p in ev.pair_paths(src, dst)
                 for ln in p}
        for link in sorted(links):
            near = next((x for tl in ev.topo.links for x, y in ((tl.a, tl.b), (tl.b, tl.a))
                         if f"{x}->{y}" == link), None)
            port = (near.node, near.port) if near is not None and any(
                s.name == near.node for s in ev.topo.switches) else None
            tel = _link_features(ev, link, port, t_on - 0.5, rank_ips)
            kind, strength, evid = _link_kind(tel, True)
            if strength < 0.5:
                continue
            evid.update({"named_by_error": f"{pe.host} -> {pe.peer}",
                         "error_lines": pe.lines})
            out.append(Culprit(component=link, type="link", kind=kind,
                               confidence=0.95 * strength, onset=tel.onset, evidence=evid))
    return out


def _hang_first(out: list[Culprit], hang: list[Culprit]) -> list[Culprit]:
    """Library-log hang / mismatch culprits ahead of what the transfers and telemetry
    suggest (a slow or late rank does not hang a collective; a link the errors name
    and the telemetry confirms stays first)."""
    if not hang:
        return out
    top = max(c.confidence for c in hang)
    confirmed = [c for c in out if "named_by_error" in c.evidence]
    for c in out:
        if c not in confirmed and c.confidence >= top:
            c.evidence["ranked_below"] = "a hang or mismatch in the library logs"
            c.confidence = 0.95 * top
    keyed = {c.key: c for c in out}
    for c in hang:
        if c.key not in keyed or keyed[c.key].confidence < c.confidence:
            keyed[c.key] = c
    return sorted(keyed.values(), key=lambda c: (-c.confidence, c.type != "link", c.key))
