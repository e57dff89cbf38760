"""Link sequence counters and loss digests, read from the switches into a loss stream.

Why here: the loss maps are pure numpy (controller.lossmap); this module is the thin
I/O shell that reads `SwitchIngress.link_lost_packets` and `link_rx_expected` of every
switch-to-switch link's receiving port over P4Runtime (one Read per switch), drains
the `link_loss_digest_t` digests each client received, and feeds both to a
`LinkLossStream` keyed by the topology's directed links.  The packets a direction
delivered are the expected sequence's advance less its loss (every stamped packet
that arrived moves it by one, a gap by the gap; a late one takes its loss back), not
the port's packet counter: only stamped packets can be lost on the link, and the
counter was a third register-sized read per switch and poll.  `loss_window` hands the
mitigation the per-poll lost and delivered counts (the gray-loss rule's input).

It also reads both ends' link sequence registers: a dead link shows no loss (the
sequence gap is only seen when a packet arrives) but its upstream egress keeps
stamping sequence numbers (retransmissions) while the sequence its downstream ingress
expects stands still; `silence` hands the mitigation the last polls' per-direction
counts of both.  The registers, not the port counters: a dead link's receiving port
still counts the frames no dropper of IPv4 stops (ARP, IPv6 neighbour discovery), and
only packets the pipelines forwarded carry a sequence number.  The
switches are read in parallel, every ingress end first, then every egress end:
a packet counted sent by one poll is counted received by the next (it arrives within
microseconds; the next ingress read is a poll later), whatever the reads' timing.
"""
from __future__ import annotations

import logging
import queue
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from controller.lossmap.links import LinkCounters, LossEvents
from controller.lossmap.stream import LinkLossStream
from controller.p4rt import ManagedSwitch, P4rtError
from controller.topology import DirectedLink, Topology, directed_links

LOG = logging.getLogger("controller.runner")

R_LOST = "SwitchIngress.link_lost_packets"
C_INGRESS = "SwitchIngress.ingress_port_counter"   # per port, every frame (not read by the poller)
R_TX_SEQ = "SwitchEgress.link_tx_seq"             # packets stamped per fabric egress port
R_RX_EXPECTED = "SwitchIngress.link_rx_expected"  # the next sequence each fabric ingress port expects
KEEP_POLLS = 16   # the polls `silence` can look back on
CONFIRM_AFTER_S = 0.05   # a packet stamped upstream has arrived downstream by then
CLEAN_POLLS = 4   # polls with arrivals after which a link that was silent is judged on its loss again
HEALTHY_MIN_PKTS = 200   # a direction shown healthy carried at least this many since its last loss
DIGEST = "link_loss_digest_t"
SEQ_MOD = 1 << 32  # link_rx_expected is bit<32>
MAX_TAKEN_BACK = 64   # loss taken back by late packets in a round; more: the register was reset


@dataclass(frozen=True, slots=True)
class _Poll:
    """One round's reads per direction (-1: an end not read)."""

    t: float                 # Unix s, when the round's ingress ends were read
    sent: np.ndarray         # cumulative: stamped by the upstream egress
    expected: np.ndarray     # cumulative: the sequence the downstream ingress expects
    quiet: np.ndarray        # arrivals through the confirming read (`_confirm_quiet`)
    lost: np.ndarray         # link_lost_packets as read (cumulative)
    lost_d: np.ndarray       # lost since the previous round (-1: unknown)
    delivered_d: np.ndarray  # delivered since the previous round (-1: unknown)


def _bits(member: object) -> int:
    return int.from_bytes(getattr(member, "bitstring", b"") or b"\x00", "big")


@dataclass(slots=True, kw_only=True)
class LinkPoller:
    """Polls every switch for its incoming links' counters and drains loss digests."""

    topo: Topology
    switches: dict[str, ManagedSwitch]
    bin_s: float = 1.0
    n_bins: int = 300
    links: list[DirectedLink] = field(init=False)
    stream: LinkLossStream = field(init=False)
    polls: int = 0
    events: int = 0
    errors: dict[str, str] = field(default_factory=dict)
    _rows: dict[tuple[str, int], int] = field(init=False)
    _forgiven: dict[tuple[str, int], int] = field(default_factory=dict)
    _first_jump: dict[tuple[str, int], int | None] = field(default_factory=dict)
    _tx_rows: dict[tuple[str, int], int] = field(init=False)
    _rx_ports: dict[str, list[int]] = field(init=False)   # switch -> its ports receiving a watched link
    _tx_ports: dict[str, list[int]] = field(init=False)   # switch -> its ports sending on one
    _polls: deque[_Poll] = field(init=False)
    _delivered: np.ndarray = field(init=False)   # per direction, cumulative (the stream's rx_packets)
    _ingress_now: tuple[float, np.ndarray, np.ndarray] | None = None   # this round's, until it ends
    # per round: (monotonic start, ingress read s, egress read s, confirming read s)
    _timing: deque[tuple[float, float, float, float]] = field(default_factory=lambda: deque(maxlen=KEEP_POLLS))
    _pool: ThreadPoolExecutor | None = None
    _silent: dict[int, int] = field(default_factory=dict)   # row -> polls with arrivals since it fell silent
    _clean: dict[int, tuple[float, int]] = field(default_factory=dict)   # row -> (clean since, packets)

    def __post_init__(self) -> None:
        self.links = directed_links(self.topo)
        self._rows = {(d.dst, d.dst_port): i for i, d in enumerate(self.links)}
        self._tx_rows = {(d.src, d.src_port): i for i, d in enumerate(self.links)}
        self._rx_ports, self._tx_ports = {}, {}
        for (sw, port) in sorted(self._rows):
            self._rx_ports.setdefault(sw, []).append(port)
        for (sw, port) in sorted(self._tx_rows):
            self._tx_ports.setdefault(sw, []).append(port)
        self._polls = deque(maxlen=KEEP_POLLS)
        self._delivered = np.zeros(len(self.links), dtype=np.int64)
        self.stream = LinkLossStream(n_links=max(1, len(self.links)), bin_ns=int(self.bin_s * 1e9),
                                     n_bins=self.n_bins, origin_ns=time.time_ns())

    def enable_digests(self, names: list[str] | None = None) -> None:
        """Ask connected switches (all, or `names`) to stream loss digests (one per
        list, acked); a restarted switch forgets this, so it is asked again."""
        for name in names if names is not None else list(self.switches):
            sw = self.switches[name]
            if sw.client is None or not sw.client.is_primary:
                continue
            try:
                sw.client.enable_digest(sw.schema.digest(DIGEST).id)
            except P4rtError as exc:
                self.errors[name] = f"digest: {exc}"

    def forgive_restart(self, name: str, port: int, sent: int | None) -> None:
        """Switch ``name`` restarted and expects sequence 0 on ``port``, but its neighbour
        could not be reset (BMv2's P4Runtime server neither writes nor reads registers)
        and goes on from ``sent`` (None: unknown): the first jump on that link is the
        restart, not loss.  Its loss event is dropped, and with ``sent`` known, the
        lost-packet readings are taken ``sent`` lower from now on (never below 0)."""
        self._forgiven[(name, port)] = sent if sent is not None else 0
        self._first_jump[(name, port)] = sent

    def _map(self, fn: Any, names: list[str]) -> dict[str, Any]:
        """``fn(name)`` for every switch at once (a P4Runtime read waits on the switch,
        not on us: eight in a row took seconds on a loaded machine); name -> result or
        the `P4rtError` it raised."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=max(1, min(16, len(self.switches))),
                                            thread_name_prefix="link-poll")

        def one(name: str) -> Any:
            try:
                return fn(name)
            except P4rtError as exc:
                return exc
        return dict(zip(names, self._pool.map(one, names), strict=True))

    def _read_egress(self, name: str) -> dict[int, int]:
        """link_tx_seq of ``name``'s ports that send on a watched link (those cells only)."""
        sw = self.switches[name]
        assert sw.client is not None
        rid = sw.schema.register(R_TX_SEQ).id
        return sw.client.read_registers([rid], self._tx_ports.get(name, [])).get(rid, {})

    def _read_ingress(self, name: str) -> tuple[dict[int, int], dict[int, int]]:
        """(link_lost_packets, link_rx_expected) of ``name``'s ports that receive a
        watched link, in one Read."""
        sw = self.switches[name]
        assert sw.client is not None
        lost_id, exp_id = sw.schema.register(R_LOST).id, sw.schema.register(R_RX_EXPECTED).id
        got = sw.client.read_registers([lost_id, exp_id], self._rx_ports.get(name, []))
        return got.get(lost_id, {}), got.get(exp_id, {})

    def poll(self, after_ingress: Callable[[], None] | None = None) -> None:
        """One round: both ends' sequence registers of every link, plus the digests
        queued so far.  ``after_ingress`` is called once the ingress ends are read and
        this round's loss is in `loss_window`, before the egress ends are read: gray
        loss needs only the ingress registers, and the egress and confirming reads
        are two of a round's three round trips (half its time on a loaded machine)."""
        t_start = time.monotonic()
        ev_rows, ev_ts, ev_exp, ev_rcv = [], [], [], []
        n = len(self.links)
        sent_cum, rx_cum = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        lost_cum = np.full(n, -1, dtype=np.int64)
        names = [name for name, sw in self.switches.items() if sw.client is not None]
        tx_at = {name: [(p, r) for (src, p), r in self._tx_rows.items() if src == name] for name in names}
        # ingress first, then egress: a packet counted sent by this poll's egress read
        # is counted received by the next poll's ingress read (findings_from_silence)
        rx_at = {name: [(p, r) for (dst, p), r in self._rows.items() if dst == name] for name in names}
        ingress = self._map(self._read_ingress, [x for x in names if rx_at[x]])
        t_ingress = time.time()
        for name in names:
            c = self.switches[name].client
            assert c is not None
            got = ingress.get(name)
            if isinstance(got, P4rtError):
                self.errors[name] = str(got)
            elif got is not None:
                reg, expected = got
                for port, row in rx_at[name]:
                    rx_cum[row] = expected.get(port, 0)
                    lost_cum[row] = reg.get(port, 0)
            while True:
                try:
                    d = c.digests.get_nowait()
                except queue.Empty:
                    break
                for data in d.data:
                    m = data.struct.members  # type: ignore[attr-defined]
                    if len(m) < 3:
                        continue
                    found = self._rows.get((name, _bits(m[0])))
                    if found is None:
                        continue
                    key = (name, _bits(m[0]))
                    if key in self._first_jump and _bits(m[1]) == 0 and \
                            self._first_jump[key] in (None, _bits(m[2])):
                        del self._first_jump[key]
                        continue    # the jump of a restart (forgive_restart)
                    ev_rows.append(found)
                    ev_ts.append(time.time_ns())  # switch clocks differ: arrival time
                    ev_exp.append(_bits(m[1]))
                    ev_rcv.append(_bits(m[2]))
        lost_d, deliv_d = self._deltas(rx_cum, lost_cum)
        # a direction back from silence: its first packet shows everything the dead link
        # swallowed as one jump, which is not this round's loss; the rounds until it
        # is clean again are no evidence of gray loss either way (a fault-free trial
        # after a link-down one was rerouted for a jump of 3873 "lost" that stayed in
        # the rule's window after the direction had stopped being `recovering`)
        for row in self._silent:
            lost_d[row] = deliv_d[row] = -1
        self._ingress_now = (t_ingress, lost_d, deliv_d)
        t_read_in = time.monotonic()
        if after_ingress is not None:
            after_ingress()
        t_hook = time.monotonic()
        egress = self._map(self._read_egress, [x for x in names if tx_at[x]])
        for name, got in egress.items():
            if isinstance(got, P4rtError):
                self.errors[name] = f"link_tx_seq: {got}"
                continue
            for port, row in tx_at[name]:
                sent_cum[row] = got.get(port, 0)
        for name in names:
            if name in ingress and not isinstance(ingress[name], P4rtError) \
                    and not isinstance(egress.get(name), P4rtError):
                self.errors.pop(name, None)
        t_read_out = time.monotonic()
        quiet = self._confirm_quiet(sent_cum, rx_cum)
        self._ingress_now = None
        self._polls.append(_Poll(t=t_ingress, sent=sent_cum, expected=rx_cum, quiet=quiet, lost=lost_cum,
                                 lost_d=lost_d, delivered_d=deliv_d))
        self._track_silence()
        self._track_clean(lost_d, deliv_d)
        self._timing.append((t_start, t_read_in - t_start, t_read_out - t_hook, time.monotonic() - t_read_out))
        rows = np.flatnonzero(lost_cum >= 0)
        if rows.size:
            self._delivered[rows] += np.maximum(deliv_d[rows], 0)
            lost = [max(0, int(lost_cum[r]) - self._forgiven.get((self.links[r].dst, self.links[r].dst_port), 0))
                    for r in rows]
            # one time for the whole round: reading eight switches takes seconds on a
            # loaded machine, and rows of one round spread over several 1 s bins made a
            # link read early look silent beside links read later (a false dead link)
            ts = np.full(rows.size, time.time_ns(), dtype=np.int64)
            self.stream.add_counters(LinkCounters(link_idx=rows, ts_ns=ts, rx_packets=self._delivered[rows],
                                                  lost_packets=np.array(lost)))
        if ev_rows:
            self.events += len(ev_rows)
            self.stream.add_events(LossEvents(link_idx=np.array(ev_rows), ts_ns=np.array(ev_ts),
                                              expected=np.array(ev_exp), received=np.array(ev_rcv)))
        self.polls += 1

    def timing(self) -> dict[str, float | int]:
        """Where the last rounds' time went (s; medians and maxima): the period between
        rounds, the ingress read, the egress read, the confirming read (with its wait)."""
        ts = list(self._timing)
        if not ts:
            return {}
        out: dict[str, float | int] = {"rounds": len(ts)}
        starts = np.array([t[0] for t in ts])
        cols = {"period": np.diff(starts), "ingress": np.array([t[1] for t in ts]),
                "egress": np.array([t[2] for t in ts]), "confirm": np.array([t[3] for t in ts])}
        for k, v in cols.items():
            if v.size:
                out[f"{k}_p50_s"] = round(float(np.median(v)), 3)
                out[f"{k}_max_s"] = round(float(v.max()), 3)
        return out

    def _deltas(self, expected: np.ndarray, lost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per direction, packets lost and delivered since the previous round (-1 where
        either round did not read it, or a register went back: a restarted switch).
        Delivered = the expected sequence's advance (mod 2^32) less the loss."""
        n = len(self.links)
        if not self._polls:
            return np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        prev = self._polls[-1]
        ok = (expected >= 0) & (prev.expected >= 0) & (lost >= 0) & (prev.lost >= 0)
        adv = (expected - prev.expected) % SEQ_MOD
        dl = lost - prev.lost     # below 0: late packets took their loss back
        ok &= (adv < SEQ_MOD // 2) & (adv >= dl) & (dl >= -MAX_TAKEN_BACK)
        return np.where(ok, np.maximum(dl, 0), -1), np.where(ok, adv - dl, -1)

    def loss_window(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The rounds kept, as intervals oldest first: (each interval's start, Unix s;
        per direction the packets lost and delivered in it, -1: unknown), the input of
        `controller.mitigate.findings_from_link_loss`."""
        polls = list(self._polls)
        times = [p.t for p in polls]
        lost = [p.lost_d for p in polls[1:]]
        deliv = [p.delivered_d for p in polls[1:]]
        if self._ingress_now is not None and polls:      # a round between its ingress and egress reads
            times.append(self._ingress_now[0])
            lost.append(self._ingress_now[1])
            deliv.append(self._ingress_now[2])
        n = len(self.links)
        if not lost:
            return np.zeros(0), np.zeros((n, 0), dtype=np.int64), np.zeros((n, 0), dtype=np.int64)
        return np.array(times[:len(lost)]), np.stack(lost, axis=1), np.stack(deliv, axis=1)

    def _confirm_quiet(self, sent_cum: np.ndarray, rx_cum: np.ndarray) -> np.ndarray:
        """Per direction, how far its downstream expected sequence moved from the last
        poll's ingress read to a confirming read after this poll's egress reads; -1 for
        directions that are no candidate (nothing stamped since the last poll, or
        something arrived).  Why a second read: this poll's ingress ends were read
        before its egress ends, so a packet stamped in between may not have been
        counted yet; the confirming read comes after every egress read (and
        ``CONFIRM_AFTER_S``), so a packet stamped since the last poll that never shows
        was lost - one poll interval after the onset is enough, however slow the reads."""
        quiet = np.full(len(self.links), -1, dtype=np.int64)
        if not self._polls:
            return quiet
        prev_sent, prev_rx = self._polls[-1].sent, self._polls[-1].expected
        valid = (sent_cum >= 0) & (prev_sent >= 0) & (rx_cum >= 0) & (prev_rx >= 0)
        cand = np.flatnonzero(valid & (sent_cum > prev_sent) & (rx_cum == prev_rx))
        if not cand.size:
            return quiet
        time.sleep(CONFIRM_AFTER_S)
        at: dict[str, list[tuple[int, int]]] = {}
        for c in cand:
            d = self.links[int(c)]
            at.setdefault(d.dst, []).append((d.dst_port, int(c)))
        got = self._map(self._read_expected, list(at))
        for name, regs in got.items():
            if isinstance(regs, P4rtError):
                continue
            for port, row in at[name]:
                exp_now = int(regs.get(port, 0))
                quiet[row] = exp_now - int(prev_rx[row]) if exp_now >= prev_rx[row] else -1
        return quiet

    def _read_expected(self, name: str) -> dict[int, int]:
        sw = self.switches[name]
        assert sw.client is not None
        return sw.client.read_register(sw.schema.register(R_RX_EXPECTED).id)

    def silence(self) -> tuple[float | None, float | None, np.ndarray, np.ndarray]:
        """The latest interval between polls: (its start and end (Unix s), per
        direction the sequence numbers its upstream egress stamped in it, and how far
        the sequence its downstream ingress expects moved by the confirming read
        (`_confirm_quiet`; -1: no candidate or not read))."""
        n = len(self.links)
        if len(self._polls) < 2:
            return None, None, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        a, b = self._polls[-2], self._polls[-1]
        sent = np.where((a.sent >= 0) & (b.sent >= a.sent), b.sent - a.sent, -1)
        return a.t, b.t, sent, b.quiet

    def _track_silence(self) -> None:
        """Directions that fell silent (stamped, nothing arrived) until ``CLEAN_POLLS``
        polls with arrivals: when such a link comes back, its first packet shows
        everything it swallowed as one sequence jump, which is not loss now (the
        mitigation reads `recovering`)."""
        if len(self._polls) < 2:
            return
        _t0, _t1, sent, quiet = self.silence()
        r0, r1 = self._polls[-2].expected, self._polls[-1].expected
        for row in range(len(self.links)):
            if sent[row] > 0 and quiet[row] == 0:
                self._silent[row] = 0
            elif row in self._silent and r0[row] >= 0 and r1[row] > r0[row]:
                self._silent[row] += 1
                if self._silent[row] >= CLEAN_POLLS:
                    del self._silent[row]

    def _track_clean(self, lost_d: np.ndarray, deliv_d: np.ndarray) -> None:
        """Per direction, since when it has delivered with no loss and how much: a loss,
        or falling silent, starts it over; a round that carried nothing (or was not
        read) neither extends nor ends it - an idle link is no evidence either way."""
        if len(self._polls) < 2:
            return
        since = self._polls[-2].t
        for row in range(len(self.links)):
            if row in self._silent or lost_d[row] > 0:
                self._clean.pop(row, None)
            elif lost_d[row] == 0 and deliv_d[row] > 0:
                t0, n = self._clean.get(row, (since, 0))
                self._clean[row] = (t0, n + int(deliv_d[row]))

    def healthy(self, now: float, min_pkts: int = HEALTHY_MIN_PKTS) -> dict[str, float]:
        """Per link (by name), the seconds both its directions have carried traffic with
        no loss (at least ``min_pkts`` packets each): the evidence an undo of the
        mitigation waits for.  Links not in it show no such evidence."""
        per: dict[str, list[float]] = {}
        for row, d in enumerate(self.links):
            t0, n = self._clean.get(row, (now, 0))
            per.setdefault(d.link, []).append(now - t0 if n >= min_pkts else -1.0)
        return {link: min(v) for link, v in per.items() if len(v) == 2 and min(v) >= 0}

    def recovering(self) -> frozenset[str]:
        """Directions (by name) that were silent and have not yet delivered for
        ``CLEAN_POLLS`` polls since."""
        return frozenset(self.links[r].name for r in self._silent)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def totals(self) -> list[dict[str, object]]:
        """Per directed link: lost packets since start and the data source."""
        lost = self.stream.lost_total if self.links else np.zeros(0)
        return [{"link": d.name, "lost": int(lost[i]), "role": str(d.role)}
                for i, d in enumerate(self.links)]
