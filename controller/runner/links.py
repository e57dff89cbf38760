"""Link sequence counters and loss digests, read from the switches into a loss stream.

Why here: the loss maps are pure numpy (controller.lossmap); this module is the thin
I/O shell that reads `SwitchIngress.link_lost_packets` and the ingress port packet
counter of every switch-to-switch link's receiving port over P4Runtime, drains the
`link_loss_digest_t` digests each client received, and feeds both to a
`LinkLossStream` keyed by the topology's directed links.

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
C_INGRESS = "SwitchIngress.ingress_port_counter"
R_TX_SEQ = "SwitchEgress.link_tx_seq"             # packets stamped per fabric egress port
R_RX_EXPECTED = "SwitchIngress.link_rx_expected"  # the next sequence each fabric ingress port expects
KEEP_POLLS = 16   # the polls `silence` can look back on
CONFIRM_AFTER_S = 0.05   # a packet stamped upstream has arrived downstream by then
CLEAN_POLLS = 4   # polls with arrivals after which a link that was silent is judged on its loss again
DIGEST = "link_loss_digest_t"


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
    # per poll: (time, stamped upstream, expected downstream, arrivals through the confirm read)
    _polls: deque[tuple[float, np.ndarray, np.ndarray, np.ndarray]] = field(init=False)
    _pool: ThreadPoolExecutor | None = None
    _silent: dict[int, int] = field(default_factory=dict)   # row -> polls with arrivals since it fell silent

    def __post_init__(self) -> None:
        self.links = directed_links(self.topo)
        self._rows = {(d.dst, d.dst_port): i for i, d in enumerate(self.links)}
        self._tx_rows = {(d.src, d.src_port): i for i, d in enumerate(self.links)}
        self._polls = deque(maxlen=KEEP_POLLS)
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
        sw = self.switches[name]
        assert sw.client is not None
        return sw.client.read_register(self.switches[name].schema.register(R_TX_SEQ).id)

    def _read_ingress(self, name: str) -> tuple[dict[int, int], dict[int, tuple[int, int]], dict[int, int]]:
        sw = self.switches[name]
        assert sw.client is not None
        schema = self.switches[name].schema
        return (sw.client.read_register(schema.register(R_LOST).id),
                sw.client.read_counter(schema.counter(C_INGRESS).id),
                sw.client.read_register(schema.register(R_RX_EXPECTED).id))

    def poll(self) -> None:
        """One round: counters of every link's two ports, plus the digests queued so far."""
        rows, rx, lost = [], [], []
        ev_rows, ev_ts, ev_exp, ev_rcv = [], [], [], []
        n = len(self.links)
        sent_cum, rx_cum = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        names = [name for name, sw in self.switches.items() if sw.client is not None]
        tx_at = {name: [(p, r) for (src, p), r in self._tx_rows.items() if src == name] for name in names}
        # ingress first, then egress: a packet counted sent by this poll's egress read
        # is counted received by the next poll's ingress read (findings_from_silence)
        rx_at = {name: [(p, r) for (dst, p), r in self._rows.items() if dst == name] for name in names}
        ingress = self._map(self._read_ingress, [x for x in names if rx_at[x]])
        egress = self._map(self._read_egress, [x for x in names if tx_at[x]])
        for name, got in egress.items():
            if isinstance(got, P4rtError):
                self.errors[name] = f"link_tx_seq: {got}"
                continue
            for port, row in tx_at[name]:
                sent_cum[row] = got.get(port, 0)
        for name in names:
            c = self.switches[name].client
            assert c is not None
            got = ingress.get(name)
            if isinstance(got, P4rtError):
                self.errors[name] = str(got)
            elif got is not None:
                reg, ctr, expected = got
                for port, row in rx_at[name]:
                    rows.append(row)
                    rx.append(ctr.get(port, (0, 0))[0])
                    rx_cum[row] = expected.get(port, 0)
                    lost.append(max(0, reg.get(port, 0) - self._forgiven.get((name, port), 0)))
                if not isinstance(egress.get(name), P4rtError):
                    self.errors.pop(name, None)
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
        quiet = self._confirm_quiet(sent_cum, rx_cum)
        self._polls.append((time.time(), sent_cum, rx_cum, quiet))
        self._track_silence()
        if rows:
            # one time for the whole round: reading eight switches takes seconds on a
            # loaded machine, and rows of one round spread over several 1 s bins made a
            # link read early look silent beside links read later (a false dead link)
            ts = [time.time_ns()] * len(rows)
            self.stream.add_counters(LinkCounters(link_idx=np.array(rows), ts_ns=np.array(ts),
                                                  rx_packets=np.array(rx), lost_packets=np.array(lost)))
        if ev_rows:
            self.events += len(ev_rows)
            self.stream.add_events(LossEvents(link_idx=np.array(ev_rows), ts_ns=np.array(ev_ts),
                                              expected=np.array(ev_exp), received=np.array(ev_rcv)))
        self.polls += 1

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
        _t, prev_sent, prev_rx, _q = self._polls[-1]
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
        return sw.client.read_register(self.switches[name].schema.register(R_RX_EXPECTED).id)

    def silence(self) -> tuple[float | None, float | None, np.ndarray, np.ndarray]:
        """The latest interval between polls: (its start and end (Unix s), per
        direction the sequence numbers its upstream egress stamped in it, and how far
        the sequence its downstream ingress expects moved by the confirming read
        (`_confirm_quiet`; -1: no candidate or not read))."""
        n = len(self.links)
        if len(self._polls) < 2:
            return None, None, np.zeros(n, dtype=np.int64), np.full(n, -1, dtype=np.int64)
        (t0, s0, _r0, _q0), (t1, s1, _r1, q1) = self._polls[-2], self._polls[-1]
        sent = np.where((s0 >= 0) & (s1 >= s0), s1 - s0, -1)
        return t0, t1, sent, q1

    def _track_silence(self) -> None:
        """Directions that fell silent (stamped, nothing arrived) until ``CLEAN_POLLS``
        polls with arrivals: when such a link comes back, its first packet shows
        everything it swallowed as one sequence jump, which is not loss now (the
        mitigation reads `recovering`)."""
        if len(self._polls) < 2:
            return
        _t0, _t1, sent, quiet = self.silence()
        (_a, _b, r0, _c), (_d, _e, r1, _f) = self._polls[-2], self._polls[-1]
        for row in range(len(self.links)):
            if sent[row] > 0 and quiet[row] == 0:
                self._silent[row] = 0
            elif row in self._silent and r0[row] >= 0 and r1[row] > r0[row]:
                self._silent[row] += 1
                if self._silent[row] >= CLEAN_POLLS:
                    del self._silent[row]

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
