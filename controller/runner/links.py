"""Link sequence counters and loss digests, read from the switches into a loss stream.

Why here: the loss maps are pure numpy (controller.lossmap); this module is the thin
I/O shell that reads `SwitchIngress.link_lost_packets` and the ingress port packet
counter of every switch-to-switch link's receiving port over P4Runtime, drains the
`link_loss_digest_t` digests each client received, and feeds both to a
`LinkLossStream` keyed by the topology's directed links.
"""
from __future__ import annotations

import logging
import queue
import time
from dataclasses import dataclass, field

import numpy as np

from controller.lossmap.links import LinkCounters, LossEvents
from controller.lossmap.stream import LinkLossStream
from controller.p4rt import ManagedSwitch, P4rtError
from controller.topology import DirectedLink, Topology, directed_links

LOG = logging.getLogger("controller.runner")

R_LOST = "SwitchIngress.link_lost_packets"
C_INGRESS = "SwitchIngress.ingress_port_counter"
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

    def __post_init__(self) -> None:
        self.links = directed_links(self.topo)
        self._rows = {(d.dst, d.dst_port): i for i, d in enumerate(self.links)}
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

    def poll(self) -> None:
        """One round: counters of every receiving port, plus the digests queued so far."""
        rows, ts, rx, lost = [], [], [], []
        ev_rows, ev_ts, ev_exp, ev_rcv = [], [], [], []
        for name, sw in self.switches.items():
            c = sw.client
            mine = [(port, row) for (dst, port), row in self._rows.items() if dst == name]
            if c is None or not mine:
                continue
            try:
                schema = sw.schema
                reg = c.read_register(schema.register(R_LOST).id)
                ctr = c.read_counter(schema.counter(C_INGRESS).id)
                now = time.time_ns()
                for port, row in mine:
                    rows.append(row)
                    ts.append(now)
                    rx.append(ctr.get(port, (0, 0))[0])
                    lost.append(max(0, reg.get(port, 0) - self._forgiven.get((name, port), 0)))
                self.errors.pop(name, None)
            except P4rtError as exc:
                self.errors[name] = str(exc)
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

    def totals(self) -> list[dict[str, object]]:
        """Per directed link: lost packets since start and the data source."""
        lost = self.stream.lost_total if self.links else np.zeros(0)
        return [{"link": d.name, "lost": int(lost[i]), "role": str(d.role)}
                for i, d in enumerate(self.links)]
