"""Requester side of an RC QP: segmentation, pacing, window and loss recovery.

Pure state machine: it is handed time and parsed packets and returns UDP payloads to
send, so every reliability rule is testable without sockets.  Sequence numbers are kept
as unbounded integers inside and folded to 24-bit PSNs only on the wire
(``psn = (start_psn + seq) mod 2**24``), which keeps window arithmetic simple across
the PSN wrap.

Loss detection for selective repeat (and FEC + selective repeat) is by transmission
order: when the receiver reports (cumulatively or in the SACK bitmap) a packet that was
transmitted after packet P, and P is still missing, P was lost (links here do not
reorder).  With FEC a data packet is only declared lost once a packet transmitted after
its block's repair packets has been reported, so the receiver had its chance to repair.
Tail losses are recovered by the retransmission timer (RTO from smoothed RTT, RFC 6298
style, doubled on each expiry).

Mode ``auto``: every message gets a :class:`traffic.recovery.MessagePlan` when it is
posted, chosen from the path's loss model (the controller's feedback,
:meth:`Requester.set_path_loss`, else the QP's own loss counters), the smoothed RTT,
the rate and the message size.  The plan's groups say which packets are coded into
interleaved blocks (members ``stride`` packets apart, their repairs sent right behind
the group's last data packet); packets outside any group are plain selective repeat.

Rate: the token bucket runs at the configured rate, which rate feedback (``set_rate``)
replaces.  A QP whose ``cc`` names a sender algorithm of :mod:`traffic.cc.registry`
runs it (a :class:`traffic.cc.base.SenderCc`, e.g. DCQCN's reaction point on its CNPs
and its own clock and bytes, or HPCC on the INT hop records echoed in its ACKs,
:meth:`Requester.on_int_echo`) with the configured rate as its line rate; feedback then
caps that rate instead of replacing it (the pacer runs at the lower of the two), as a
NIC with a rate limiter above its DCQCN would, and the algorithm's window (HPCC's)
bounds the packets in flight.
"""
from __future__ import annotations

import collections
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from common.loss import LossModel
from formats import roce
from formats.roce import (
    BTH_LEN,
    ICRC_LEN,
    PSN_MASK,
    RETH_LEN,
    AethSyndrome,
    Opcode,
    PacketTemplate,
)
from traffic import fec_codec as fec
from traffic import recovery
from traffic.cc import registry as cc_registry
from traffic.cc.base import SenderCc
from traffic.cc.dcqcn import DcqcnReactionPoint, DcqcnSender
from traffic.cc.hpcc import HpccSender, HpccState
from traffic.echo_guard import EchoGuard
from traffic.errors import ConfigError
from traffic.pacing import MAX_RATE_BPS, MIN_RATE_BPS, TokenBucket
from traffic.qp_types import (
    MessageRecord,
    QpConfig,
    QpCounters,
    Reliability,
    check_fec,
    encode_symbol,
)

__all__ = ["WIRE_OVERHEAD", "Requester", "full_pkt_wire_bytes"]

WIRE_OVERHEAD = 14 + 20 + 8  # Ethernet + IPv4 + UDP bytes around each UDP payload


def full_pkt_wire_bytes(mtu: int) -> int:
    """Bytes a full packet of a message occupies on the wire (what the recovery policy
    prices a packet at: headers around ``mtu`` bytes of payload)."""
    return mtu + BTH_LEN + ICRC_LEN + WIRE_OVERHEAD


@dataclass(slots=True)
class _Pkt:
    seq: int
    msg: MessageRecord
    buf: bytearray  # whole UDP payload, ICRC slot included
    opcode: int
    last_tx: int = -1  # transmission counter of the latest send
    prev_tx: int = -1  # ... and of the one before (retransmission ambiguity)
    first_tx: int = -1  # ... and of the first (the original)
    first_sent_s: float = 0.0
    rto_retx: bool = False  # resent by the retransmission timer
    sent_s: float = 0.0
    retx: int = 0
    acked: bool = False
    queued: bool = False
    block: int = -1  # FEC block id, -1 when not in a block
    grp: _Group | None = None  # mode auto: the interleaved group coding this packet


@dataclass(slots=True)
class _Block:
    base_seq: int
    seqs: list[int]
    m: int  # its repair packets
    repair_tx: int = -1  # transmission counter of the last repair packet


@dataclass(slots=True)
class _Group:
    """A :class:`traffic.recovery.Group` being sent: symbols collected per block."""

    first_seq: int
    count: int
    blocks: int
    m: int
    members: list = field(default_factory=list)  # per block: [(pkt, symbol)]
    added: int = 0


@dataclass(slots=True, kw_only=True)
class Requester:
    """Sends RDMA WRITE messages on one QP.  Drive it with :meth:`poll` and :meth:`on_ack`."""

    cfg: QpConfig
    local_ip: str
    sport: int
    start_psn: int = 0
    now_s: float = 0.0
    counters: QpCounters = field(default_factory=QpCounters)
    messages: list[MessageRecord] = field(default_factory=list)
    rate_log: list[tuple[float, float]] = field(default_factory=list)
    fec_log: list[tuple[float, int, int]] = field(default_factory=list)
    # internal state
    _tmpl: PacketTemplate = field(init=False)
    _bucket: TokenBucket = field(init=False)
    _pending: collections.deque = field(init=False)  # packets never sent yet
    _next_seq: int = 0
    _una: int = 0
    _sent_up_to: int = 0  # first seq never transmitted
    _pkts: dict = field(default_factory=dict)
    _retx_q: collections.deque = field(default_factory=collections.deque)
    _tx_order: collections.deque = field(default_factory=collections.deque)
    _tx_counter: int = 0
    _highest_reported_tx: int = -1
    # within one ACK: retransmitted packets it acknowledged and the transmission number
    # of the newest never-retransmitted one (_settle_retx_acks)
    _retx_acked: list = field(default_factory=list)
    _ack_fresh_tx: int = -1
    _blocks: dict = field(default_factory=dict)
    _open_block: list = field(default_factory=list)
    _block_id: int = 0
    _repair_q: collections.deque = field(default_factory=collections.deque)
    _srtt: float | None = None
    _rttvar: float = 0.0
    _rto: float = 0.05
    _rto_deadline: float | None = None
    _progress: bool = False
    _min_rtt: float | None = None
    _rtt_cand: float | None = None
    _rtos_unsampled: int = 0  # retransmission timeouts since the last RTT sample
    _rto_floor: float = 0.0  # learnt from spurious timeouts (_settle_retx_acks)
    _msg_id: int = 0
    _va: int = 0x10000
    _cc: SenderCc | None = None      # the QP's own rate control (cfg.cc), None: none
    _rate_cap_bps: float | None = None  # rate feedback, a cap over the algorithm's rate
    _win_pkts: int = 0              # packets in flight allowed (the algorithm's window or the config)
    _pacer_due: float | None = None  # per-packet pacing: when the pacer let the next packet go
    _per_packet: bool = False        # paced one packet at a time (the algorithm's choice)
    echo_guard: EchoGuard = field(default_factory=EchoGuard)  # implausible echoes, counted
    policy: recovery.PolicyConfig = field(default_factory=recovery.PolicyConfig)  # mode auto
    loss_estimate: recovery.LossEstimator = field(default_factory=recovery.LossEstimator)
    path_loss_log: list[tuple[float, str]] = field(default_factory=list)
    path_notices: int = 0            # the controller's "route changed" notices (control API)
    path_resends: int = 0            # ... of which found the QP stalled and resent at once

    def __post_init__(self) -> None:
        self._tmpl = PacketTemplate(src=self.local_ip, dst=self.cfg.peer_ip, sport=self.sport)
        make = cc_registry.get(self.cfg.cc, ("none", "sender")).sender
        self._cc = make(self.cfg, self.now_s) if make is not None else None
        burst = self._cc.pacing_burst_pkts if self._cc is not None else None
        self._per_packet = burst is not None
        if burst is not None:  # per-packet pacing (HPCC as ns-3's NIC paces)
            full = self.cfg.mtu + BTH_LEN + RETH_LEN + ICRC_LEN + WIRE_OVERHEAD
            self._bucket = TokenBucket(
                rate_bps=self.cfg.rate_bps, last_t=self.now_s, burst_s=0.0,
                min_burst_bytes=int(burst * full))
        else:
            self._bucket = TokenBucket(rate_bps=self.cfg.rate_bps, last_t=self.now_s)
        self._win_pkts = self.cfg.window_pkts
        self._cc_window()  # the algorithm's window bounds the first round trip too
        self._pending = collections.deque()
        self._rto = max(self.cfg.rto_initial_s, self.cfg.rto_min_s)
        self.rate_log.append((self.now_s, float(self.cfg.rate_bps)))
        self.fec_log.append((self.now_s, self.cfg.fec_k, self.cfg.fec_m))
        if self._cc is not None:
            self._apply_cc_rate(self.now_s)  # an algorithm may start below the line rate
        if self.cfg.mode.coded:
            fec.prepare(self.cfg.fec_k, self.cfg.fec_m)
        if self.cfg.path_loss is not None:
            self.path_loss_log.append((self.now_s, recovery.describe(self.cfg.path_loss)))

    # -- public API ------------------------------------------------------------------
    @property
    def qpn(self) -> int:
        return self.cfg.qpn

    @property
    def outstanding(self) -> int:
        """Packets sent (at least once) and not yet acknowledged."""
        return self._sent_up_to - self._una

    @property
    def idle(self) -> bool:
        """True when every posted message is acknowledged."""
        return self._una == self._next_seq and not self._repair_q

    @property
    def srtt_s(self) -> float | None:
        return self._srtt

    @property
    def next_new_psn(self) -> int:
        """Wire PSN of the next never-sent packet (the first paced at a rate set now)."""
        return (self.start_psn + self._sent_up_to) & PSN_MASK

    @property
    def cc(self) -> SenderCc | None:
        """The QP's own rate control (None with ``cfg.cc`` none)."""
        return self._cc

    @property
    def dcqcn(self) -> DcqcnReactionPoint | None:
        """The QP's DCQCN reaction point (None unless ``cfg.cc`` is dcqcn)."""
        return self._cc.rp if isinstance(self._cc, DcqcnSender) else None

    def post_write(self, data: bytes | bytearray | memoryview, *, tag: str = "",
                   now: float | None = None) -> MessageRecord:
        """Queue one RDMA WRITE of ``data``; returns its record (filled on completion)."""
        if now is not None:
            self.now_s = now
        n = len(data)
        if n == 0:
            raise ConfigError(f"QP {self.qpn}: an RDMA WRITE needs at least one byte")
        self._msg_id += 1
        msg = MessageRecord(msg_id=self._msg_id, size=n, posted_s=self.now_s,
                            crc32=zlib.crc32(data), tag=tag)
        mtu = self.cfg.mtu
        view = memoryview(bytes(data))
        npk = (n + mtu - 1) // mtu
        va = self._va
        self._va += (n + 4095) & ~4095
        for i in range(npk):
            chunk = view[i * mtu:(i + 1) * mtu]
            if npk == 1:
                op = Opcode.WRITE_ONLY
            elif i == 0:
                op = Opcode.WRITE_FIRST
            elif i == npk - 1:
                op = Opcode.WRITE_LAST
            else:
                op = Opcode.WRITE_MIDDLE
            seq = self._next_seq
            self._next_seq += 1
            reth = roce.pack_reth(va, self.cfg.qpn, n) if op in roce.RETH_OPCODES else b""
            bth = roce.pack_bth(op, self.cfg.peer_qpn, (self.start_psn + seq) & PSN_MASK,
                                ack_req=op in roce.LAST_OPCODES)
            buf = bytearray(bth + reth + bytes(chunk) + bytes(ICRC_LEN))
            self._tmpl.finish(buf)
            pkt = _Pkt(seq=seq, msg=msg, buf=buf, opcode=op)
            self._pkts[seq] = pkt
            self._pending.append(pkt)
        msg.extra["last_seq"] = self._next_seq - 1
        if self.cfg.mode is Reliability.AUTO:
            self._plan_message(msg, npk)
        self.messages.append(msg)
        return msg

    def set_path_loss(self, model: LossModel | None, now: float) -> None:
        """The path's loss model from the controller's loss map (control API); the
        next message posted is planned with it (mode auto)."""
        self.cfg.path_loss = model
        self.path_loss_log.append((now, "none" if model is None else recovery.describe(model)))

    def path_view(self) -> recovery.PathView | None:
        """What mode auto decides from: the controller's model, else the QP's own; the
        RTT, the rate, and whether what is posted (the message being planned included:
        its packets are queued first) fills the round trip."""
        model, source = self.cfg.path_loss, "controller"
        if model is None:
            model, source = self.loss_estimate.model(), "own counters"
        if model is None:
            return None
        rtt = self._srtt if self._srtt is not None else self.cfg.rto_initial_s
        return recovery.make_view(model, source, rtt_s=rtt, rate_bps=self.cfg.rate_bps,
                                  wire_pkt_bytes=full_pkt_wire_bytes(self.cfg.mtu),
                                  rto_min_s=self.cfg.rto_min_s,
                                  posted_pkts=self._next_seq - self._una,
                                  rtt_measured=self._srtt is not None)

    def warm_plans(self, sizes: list[int]) -> None:
        """Decide for messages of these byte sizes now (mode auto): :func:`recovery.warm`."""
        view = self.path_view()
        if view is None or self.cfg.mode is not Reliability.AUTO:
            return
        recovery.warm(view, sizes, mtu=self.cfg.mtu, rto_min_s=self.cfg.rto_min_s,
                      cfg=self.policy)

    def _plan_message(self, msg: MessageRecord, npk: int) -> None:
        """Choose the message's scheme and attach its groups to its packets."""
        view = self.path_view()
        if view is None:
            plan = recovery.MessagePlan(scheme="sr", reason="no loss telemetry yet")
        else:
            plan = recovery.choose(view, npk, self.policy)
        msg.extra["recovery"] = plan.as_dict(npk)
        first = self._next_seq - npk
        for g in plan.groups:
            rg = _Group(first_seq=first + g.first, count=g.count, blocks=g.blocks, m=g.m,
                        members=[[] for _ in range(g.blocks)])
            for s in range(rg.first_seq, rg.first_seq + g.count):
                self._pkts[s].grp = rg

    def set_rate(self, rate_bps: float, now: float) -> None:
        """Change the pacing rate (control API); effective for the next packet.

        With a rate control of its own (DCQCN, HPCC ...) the new rate caps the
        algorithm's rate instead of replacing it.
        """
        if self._cc is None:
            self._bucket.set_rate(rate_bps, now)
            self.cfg.rate_bps = float(rate_bps)
            self.rate_log.append((now, float(rate_bps)))
            return
        if not MIN_RATE_BPS <= rate_bps <= MAX_RATE_BPS:
            raise ConfigError(f"QP {self.qpn}: rate_bps={rate_bps!r} outside "
                              f"{MIN_RATE_BPS:g}..{MAX_RATE_BPS:g}")
        self._rate_cap_bps = float(rate_bps)
        self._apply_cc_rate(now)

    def _apply_cc_rate(self, now: float) -> None:
        """Pace at the algorithm's rate, capped by rate feedback."""
        assert self._cc is not None
        rate = max(MIN_RATE_BPS, self._cc.rate_bps)
        if self._rate_cap_bps is not None:
            rate = min(rate, self._rate_cap_bps)
        if rate != self.cfg.rate_bps:
            self._bucket.set_rate(rate, now)
            self.cfg.rate_bps = rate
            self.rate_log.append((now, rate))

    def set_fec(self, k: int, m: int, now: float) -> None:
        """Change FEC k and m; the open block is closed first (control API)."""
        check_fec(k, m, where=f"QP {self.qpn} FEC update")
        self._close_block()
        if self.cfg.mode is Reliability.FEC:
            fec.prepare(k, m)
        self.cfg.fec_k, self.cfg.fec_m = k, m
        self.fec_log.append((now, k, m))

    # -- sending ---------------------------------------------------------------------
    def poll(self, now: float, out: list[bytes], budget: int = 64, *,
             timers: bool = True) -> float | None:
        """Append up to ``budget`` packets due now to ``out``.

        ``timers=False``: the caller has packets left unread (ACKs may be among them),
        so the retransmission timer must not fire yet.  Returns the earliest time
        something else will be due (None when nothing is).
        """
        cc = self._cc
        if cc is None:
            return self._poll(now, out, budget, timers)
        if cc.tick(now):
            self._apply_cc_rate(now)
        sent0 = self.counters.tx_bytes
        wake = self._poll(now, out, budget, timers)
        cc.on_sent(self.counters.tx_bytes - sent0)
        return wake

    def _poll(self, now: float, out: list[bytes], budget: int, timers: bool) -> float | None:
        self.now_s = now
        if timers:
            self._check_rto(now)
        bucket = self._bucket
        sent = 0
        while sent < budget:
            pkt_buf: bytearray | bytes | None = None
            kind = ""
            if self._retx_q:
                seq = self._retx_q[0]
                p = self._pkts.get(seq)
                if p is None or p.acked:
                    self._retx_q.popleft()
                    if p is not None:
                        p.queued = False
                    continue
                pkt_buf, kind = p.buf, "retx"
            elif self._repair_q:
                pkt_buf, kind = self._repair_q[0][1], "repair"
            elif self._pending and self._sent_up_to - self._una < self._win_pkts:
                pkt_buf, kind = self._pending[0].buf, "new"
            else:
                if (self._pending and self.cfg.mode is Reliability.FEC
                        and 2 * len(self._open_block) >= self.cfg.fec_k):
                    # window-blocked with at least half a block open: let the receiver
                    # repair now.  A smaller block waits for the window: under a
                    # window-based CC (HPCC's R x T) the QP is blocked after nearly every
                    # packet, and closing each one- or two-packet block with its m
                    # repairs cost the demo's WAN QPs 12 % of their packets at k=32, m=1
                    self._close_block()
                    continue
                if self._pending and self._split_group(self._pending[0]):
                    continue  # the same, for an interleaved group
                self._pacer_due = None  # nothing to send: idle time earns nothing
                break
            wire = len(pkt_buf) + WIRE_OVERHEAD
            due = self._pacer_due
            if due is not None and due < now and self._per_packet:
                # ns-3's NIC sends the next packet size / R after this one was due; the
                # loop woke late, so the packet is charged at its due time, and the
                # next one's gap runs from there (a late wake-up costs no rate)
                self._pacer_due = None  # (1 us: the due time was computed in floats)
                if (not bucket.try_take(wire, min(now, due + 1e-6))
                        and not bucket.try_take(wire, now)):
                    self._pacer_due = now + bucket.wait_s(wire)
                    return self._pacer_due
            elif not bucket.try_take(wire, now):
                self._pacer_due = now + bucket.wait_s(wire)
                return self._pacer_due
            self._tx_counter += 1
            tx = self._tx_counter
            c = self.counters
            c.tx_pkts += 1
            c.tx_bytes += wire
            if kind == "retx":
                seq = self._retx_q.popleft()
                p = self._pkts[seq]
                p.queued = False
                p.retx += 1
                p.prev_tx = p.last_tx
                p.last_tx = tx
                p.sent_s = now
                c.retx_pkts += 1
                c.retx_bytes += wire
                p.msg.retx_pkts += 1
                if self.cfg.mode is not Reliability.GBN:
                    self._tx_order.append((tx, seq))
            elif kind == "repair":
                block_id, _buf = self._repair_q.popleft()
                blk = self._blocks.get(block_id)
                if blk is not None:
                    blk.repair_tx = tx
                c.repair_pkts += 1
            else:
                p = self._pending.popleft()
                p.last_tx = p.first_tx = tx
                p.sent_s = p.first_sent_s = now
                self._sent_up_to = p.seq + 1
                c.tx_data_pkts += 1
                if self.cfg.mode is not Reliability.GBN:
                    self._tx_order.append((tx, p.seq))
                if self.cfg.mode is Reliability.FEC and self.cfg.fec_m > 0:
                    self._add_to_block(p)
                    if not self._pending:
                        self._close_block()
                elif p.grp is not None:
                    self._add_to_group(p)
                elif self.cfg.mode is Reliability.AUTO:
                    self.loss_estimate.on_sent()
            out.append(bytes(pkt_buf))
            sent += 1
            if self._rto_deadline is None:
                self._rto_deadline = now + self._rto
        if sent >= budget:
            return now
        return self._rto_deadline if self.outstanding else None

    # -- FEC blocks ------------------------------------------------------------------
    def _add_to_block(self, p: _Pkt) -> None:
        reth = bytes(p.buf[BTH_LEN:BTH_LEN + RETH_LEN]) if p.opcode in roce.RETH_OPCODES else None
        start = BTH_LEN + (RETH_LEN if reth else 0)
        sym = encode_symbol(p.opcode, reth, p.buf[start:-ICRC_LEN])
        self._open_block.append((p, sym))
        if len(self._open_block) >= self.cfg.fec_k:
            self._close_block()

    def _close_block(self) -> None:
        members = self._open_block
        if not members:
            return
        self._open_block = []
        m = self.cfg.fec_m
        if m == 0:
            return
        self._block_id += 1
        bid = self._block_id
        slen = max(len(s) for _, s in members)
        syms = [s + bytes(slen - len(s)) for _, s in members]
        repairs = fec.encode(syms, m)
        base = members[0][0].seq
        if any(p.seq != base + i for i, (p, _) in enumerate(members)):
            raise ConfigError(f"QP {self.qpn}: FEC block members are not consecutive")
        blk = _Block(base_seq=base, seqs=[p.seq for p, _ in members], m=m)
        self._blocks[bid] = blk
        for p, _ in members:
            p.block = bid
        psn = (self.start_psn + base) & PSN_MASK
        for j, rsym in enumerate(repairs):
            body = roce.pack_bth(Opcode.FEC_REPAIR, self.cfg.peer_qpn, psn) + roce.pack_fec_header(
                k=self.cfg.fec_k, m=m, index=j, symbol_len=slen, data_count=len(members))
            buf = bytearray(body + rsym + bytes(ICRC_LEN))
            self._tmpl.finish(buf)
            self._repair_q.append((bid, buf))

    def _symbol(self, p: _Pkt) -> bytes:
        reth = bytes(p.buf[BTH_LEN:BTH_LEN + RETH_LEN]) if p.opcode in roce.RETH_OPCODES else None
        start = BTH_LEN + (RETH_LEN if reth else 0)
        return encode_symbol(p.opcode, reth, p.buf[start:-ICRC_LEN])

    def _add_to_group(self, p: _Pkt) -> None:
        g = p.grp
        assert g is not None
        g.members[(p.seq - g.first_seq) % g.blocks].append((p, self._symbol(p)))
        g.added += 1
        if g.added == g.count:
            self._close_group(g)

    def _close_group(self, g: _Group) -> None:
        """Encode every block of the group and queue the repairs in the interleaver's
        round robin (:func:`traffic.recovery.repair_order`)."""
        repairs: dict[tuple[int, int], bytearray] = {}
        ids: dict[int, int] = {}
        for j, members in enumerate(g.members):
            if not members or g.m == 0:
                continue
            self._block_id += 1
            bid = ids[j] = self._block_id
            slen = max(len(sym) for _, sym in members)
            syms = [sym + bytes(slen - len(sym)) for _, sym in members]
            blk = _Block(base_seq=members[0][0].seq, seqs=[p.seq for p, _ in members],
                         m=g.m)
            self._blocks[bid] = blk
            for p, _ in members:
                p.block = bid
            psn = (self.start_psn + blk.base_seq) & PSN_MASK
            for r, rsym in enumerate(fec.encode(syms, g.m)):
                hdr = roce.pack_fec_header(k=min(255, len(members)), m=g.m, index=r,
                                           symbol_len=slen, data_count=len(members),
                                           stride=g.blocks if g.blocks > 1 else 0)
                buf = bytearray(roce.pack_bth(Opcode.FEC_REPAIR, self.cfg.peer_qpn, psn)
                                + hdr + rsym + bytes(ICRC_LEN))
                self._tmpl.finish(buf)
                repairs[(j, r)] = buf
        shape = recovery.Group(first=0, count=g.added, blocks=g.blocks, m=g.m)
        for j, r in recovery.repair_order(shape):
            if (j, r) in repairs:
                self._repair_q.append((ids[j], repairs[(j, r)]))
        g.members = []

    def _split_group(self, nxt: _Pkt) -> bool:
        """Window-blocked inside a group: close what was sent of it (the receiver can
        repair now) and code the rest as a group of its own.  True when it did.

        Each part keeps its share of the repairs (at least one per block), so a split
        costs about one repair per block more than the plan, not a second plan."""
        g = nxt.grp
        if g is None or g.added == 0 or g.added >= g.count:
            return False
        left = g.count - g.added
        rest = _Group(first_seq=nxt.seq, count=left, blocks=max(1, min(g.blocks, left)),
                      m=max(1, -(-g.m * left // g.count)))
        rest.members = [[] for _ in range(rest.blocks)]
        g.m = max(1, -(-g.m * g.added // g.count))
        g.count = g.added
        self._close_group(g)
        for s in range(rest.first_seq, rest.first_seq + rest.count):
            self._pkts[s].grp = rest
        return True

    # -- acknowledgements ------------------------------------------------------------
    def _abs(self, psn: int) -> int:
        """Absolute sequence number of a wire PSN, relative to the unacked edge."""
        ref = (self.start_psn + self._una) & PSN_MASK
        return self._una + roce.psn_diff(psn, ref)

    def on_ack(self, pkt: roce.RocePacket, now: float) -> None:
        """Process an ACKNOWLEDGE (ACK, NAK, SACK)."""
        self.now_s = now
        c = self.counters
        aeth = pkt.aeth
        if aeth is None:
            return
        psn_seq = self._abs(pkt.bth.psn)
        if aeth.is_nak:
            c.naks_rx += 1
            if aeth.syndrome == AethSyndrome.NAK_PSN_SEQ_ERROR:
                # BTH PSN is the expected PSN: everything before it arrived
                self._ack_up_to(psn_seq, now)
                if self._una == psn_seq <= self._sent_up_to:  # else a stale or bogus NAK
                    self._go_back(psn_seq)
            self._settle_retx_acks(now)
            self._rearm(now)
            return
        c.acks_rx += 1
        # ACK: BTH PSN is the last PSN received in order
        self._ack_up_to(psn_seq + 1, now)
        if pkt.sack is not None and self.cfg.mode is not Reliability.GBN:
            base = self._abs(pkt.sack.base_psn)
            bits = pkt.sack.bitmap
            for byte_i, b in enumerate(bits):
                if not b:
                    continue
                for bit in range(8):
                    if b & (0x80 >> bit):
                        self._mark_acked(base + byte_i * 8 + bit, now)
        self._settle_retx_acks(now)
        if self.cfg.mode is not Reliability.GBN:
            self._detect_losses()
        self._rearm(now)

    def on_int_echo(self, hops: tuple, pkt: roce.RocePacket, now: float) -> None:
        """INT hop records echoed in an ACK (after :meth:`on_ack` took the ACK itself).

        An algorithm that wants them (``wants_echo``: HPCC) updates the rate from them,
        after :mod:`traffic.echo_guard` dropped implausible ones.
        """
        self.counters.echo_acks += 1
        cc = self._cc
        if cc is None or not cc.wants_echo or pkt.aeth is None:
            return
        ack_seq = self._abs(pkt.bth.psn) + (0 if pkt.aeth.is_nak else 1)
        if self.echo_guard.check(hops, ack_seq=ack_seq, una=self._una,  # traffic.echo_guard
                                 next_seq=self._sent_up_to, window_pkts=self.cfg.window_pkts):
            return
        if cc.on_ack(hops, ack_seq=ack_seq, next_seq=self._sent_up_to, now_s=now):
            self._apply_cc_rate(now)
        self._cc_window()

    def _cc_window(self) -> None:
        """Packets in flight: the algorithm's window (at least one), within the config."""
        w_bytes = self._cc.window_bytes() if self._cc is not None else None
        if w_bytes is None:
            return
        wire = full_pkt_wire_bytes(self.cfg.mtu)
        w = -(-w_bytes // wire)
        self._win_pkts = int(min(self.cfg.window_pkts, max(1, w)))

    @property
    def hpcc(self) -> HpccState | None:
        """The QP's HPCC state (None unless ``cfg.cc`` is hpcc-sender)."""
        return self._cc.state if isinstance(self._cc, HpccSender) else None

    def on_cnp(self, now: float) -> None:
        """A Congestion Notification Packet for this QP: counted; the algorithm reacts."""
        self.counters.cnps_rx += 1
        if self._cc is not None and self._cc.on_cnp(now):
            self._apply_cc_rate(now)

    def _mark_acked(self, seq: int, now: float) -> None:
        p = self._pkts.get(seq)
        if p is None or p.acked or p.last_tx < 0:
            return
        p.acked = True
        self._progress = True
        self.counters.acked_bytes += len(p.buf) - ICRC_LEN
        tx = p.last_tx
        if p.retx and self._min_rtt is not None and now - p.sent_s < 0.8 * self._min_rtt:
            # too early to be the retransmission's ACK: the original arrived after all,
            # so only packets sent before the original may be declared lost
            tx = p.prev_tx
        elif p.retx:   # decided once the whole ACK is read (_settle_retx_acks)
            self._retx_acked.append(p)
            tx = -1
        else:
            self._ack_fresh_tx = max(self._ack_fresh_tx, tx)
        self._highest_reported_tx = max(self._highest_reported_tx, tx)
        if p.retx == 0:  # Karn: only never-retransmitted packets give RTT samples
            rtt = now - p.sent_s
            if self._rtt_cand is None or rtt < self._rtt_cand:
                self._rtt_cand = rtt

    def _settle_retx_acks(self, now: float) -> None:
        """Which transmission of each retransmitted packet this ACK acknowledged.

        The transmission-order rule declares lost every unacknowledged packet sent
        before the acknowledged one; taking a retransmission's ACK for the original's
        would declare lost a whole window still in flight (a timeout that fired only
        because ACKs were late: a busy receiver, a queue in its socket buffer).  If the
        same ACK newly acknowledges a never-retransmitted packet sent after the
        original, the receiver most likely took the original (FIFO path: had the
        original been lost, that later packet would usually have been acknowledged
        earlier, before the retransmission filled the hole), so only packets sent
        before the original count: at worst a real loss waits for the next ACK or
        timer.  Otherwise the retransmission is what arrived.

        A timer that fired for a packet the receiver had (Eifel, RFC 4015) is counted
        and raises the QP's timer floor to the delay its ACK took (a peer descheduled
        on a busy host), so the next such delay costs nothing; the floor decays
        with every RTT sample.
        """
        for p in self._retx_acked:
            original = self._ack_fresh_tx > p.first_tx
            tx = p.first_tx if original else p.last_tx
            self._highest_reported_tx = max(self._highest_reported_tx, tx)
            if original and p.rto_retx:
                self.counters.spurious_timeouts += 1
                self._rto_floor = min(self.cfg.rto_max_s,
                                      max(self._rto_floor, 1.25 * (now - p.first_sent_s)))
        self._retx_acked.clear()
        self._ack_fresh_tx = -1

    def _ack_up_to(self, seq: int, now: float) -> None:
        """Everything below ``seq`` has been received."""
        if seq <= self._una:
            return
        seq = min(seq, self._sent_up_to)
        for s in range(self._una, seq):
            p = self._pkts.get(s)
            if p is None:
                continue
            if not p.acked:
                self._mark_acked(s, now)
            del self._pkts[s]
            if p.opcode in roce.LAST_OPCODES and p.msg.done_s is None:
                p.msg.done_s = now
                self.counters.msgs_done += 1
            if p.block >= 0:
                blk = self._blocks.get(p.block)
                if blk is not None and blk.seqs[-1] == s:
                    del self._blocks[p.block]
        self._una = max(self._una, seq)

    def _rearm(self, now: float) -> None:
        """Restart the retransmission timer after an ACK that acknowledged new data.

        One RTT sample per ACK: the newest packet it acknowledges (a coalesced ACK
        covers older packets too, whose waiting time is not round-trip time).
        """
        if self._rtt_cand is not None:
            self._rtt_sample(self._rtt_cand)
            self._rtt_cand = None
        if self._progress:
            self._progress = False
            self._rto = self._rto_value()
            self._rto_deadline = now + self._rto if self.outstanding else None

    def _detect_losses(self) -> None:
        order = self._tx_order
        hi = self._highest_reported_tx
        while order and order[0][0] < hi:
            tx, seq = order[0]
            p = self._pkts.get(seq)
            if p is None or p.acked or p.last_tx != tx:
                order.popleft()
                continue
            if p.block >= 0 and p.retx == 0:
                blk = self._blocks.get(p.block)
                if (blk is not None and (blk.repair_tx < 0 or blk.repair_tx >= hi)
                        and self._missing(blk.seqs, hi) <= blk.m):
                    break  # the receiver may still repair this block
            elif p.retx == 0 and p.grp is not None and p.grp.added < p.grp.count:
                g = p.grp
                block = g.members[(p.seq - g.first_seq) % g.blocks]
                if self._missing((pk.seq for pk, _ in block), hi) <= g.m:
                    break  # its group is still being sent: its blocks' repairs are to come
            elif (p.retx == 0 and self._in_open_block(p.seq)
                  and self._missing((pk.seq for pk, _ in self._open_block), hi)
                  <= self.cfg.fec_m):
                break  # its block is still being sent: the same, for mode fec
            order.popleft()
            if not p.queued:
                p.queued = True
                self._retx_q.append(seq)
                if p.grp is None and p.retx == 0 and self.cfg.mode is Reliability.AUTO:
                    self.loss_estimate.on_lost(seq)

    def _missing(self, seqs: Iterable[int], hi: int) -> int:
        """How many of a block's data packets the ACKs show missing (not acknowledged,
        though a packet sent after them was).  More than the block's repairs and the
        block cannot be rebuilt whatever arrives: its losses are resent at once, not
        after the rest of its group and its repairs have gone out (a 111-packet burst
        in a 320-packet group cost a message 100 ms at 20 ms RTT, selective repeat's
        worst on that path 84 ms).  The engine's ``missing`` (tn_qp.c) is the same."""
        n = 0
        for s in seqs:
            pk = self._pkts.get(s)
            if pk is not None and not pk.acked and 0 <= pk.last_tx < hi:
                n += 1
        return n

    def _in_open_block(self, seq: int) -> bool:
        """Whether ``seq`` is in mode fec's open block and that block will close (its
        repairs sent) without waiting for an ACK: the QP may send more, or it is
        window-blocked with half a block open (:meth:`poll` closes it).  A window-blocked
        QP with a smaller block open keeps it open until the window moves, which this
        very loss stops: then the loss is declared as it would be without FEC."""
        ob = self._open_block
        if not ob or seq < ob[0][0].seq:
            return False
        return (self._sent_up_to - self._una < self._win_pkts
                or 2 * len(ob) >= self.cfg.fec_k)

    def _go_back(self, seq: int) -> None:
        """Go-back-N: resend everything from ``seq`` that was already sent."""
        self._retx_q.clear()
        for s in range(seq, self._sent_up_to):
            p = self._pkts.get(s)
            if p is not None:
                p.queued = True
                self._retx_q.append(s)

    # -- timers ----------------------------------------------------------------------
    def _rtt_sample(self, rtt: float) -> None:
        if rtt <= 0:
            return
        if self._cc is not None:
            self._cc.on_rtt(rtt)
        self._rtos_unsampled = 0
        self._rto_floor *= 0.99
        if self._min_rtt is None or rtt < self._min_rtt:
            self._min_rtt = rtt
        if self._srtt is None:
            self._srtt, self._rttvar = rtt, rtt / 2
        else:
            self._rttvar = 0.75 * self._rttvar + 0.25 * abs(self._srtt - rtt)
            self._srtt = 0.875 * self._srtt + 0.125 * rtt

    def _rto_value(self) -> float:
        if self._srtt is None:
            return max(self.cfg.rto_initial_s, self.cfg.rto_min_s)
        var = max(self._rttvar, self._srtt / 8)
        return min(self.cfg.rto_max_s, max(self.cfg.rto_min_s, self._rto_floor,
                                            self._srtt + 4 * var))

    def path_changed(self, now: float) -> bool:
        """The controller moved this QP's route (control API, ``path_changed``); True
        when it resent at once.

        Why: while a dead link stalled the QP its timer backed off exponentially
        (0.05, 0.1, ... 1.6 s); after the reroute the new path is good at once, but
        without a word the QP would sit out the rest of its backed-off timeout before
        resending what the old path swallowed.  So: the timeout goes back to its base
        value (the RTT's, as after an ACK), and a QP whose timer had fired since its
        last progress (stalled) resends its oldest unacknowledged packets now
        (go-back-N: from the oldest; otherwise the oldest missing one), as its
        timeout would have, without doubling it.  A QP that was not stalled keeps its
        packets in flight and only has its timer rearmed at the base value."""
        self.path_notices += 1
        base = self._rto_value()
        stalled = self.outstanding > 0 and self._rto > base
        self._rto = base
        if not self.outstanding:
            self._rto_deadline = None
            return False
        if stalled:
            self._resend_oldest()
            self.path_resends += 1
        if stalled or self._rto_deadline is None or self._rto_deadline > now + base:
            self._rto_deadline = now + base
        return stalled

    def _check_rto(self, now: float) -> None:
        if self._rto_deadline is None or now < self._rto_deadline:
            return
        if not self.outstanding:
            self._rto_deadline = None
            return
        self._resend_oldest()
        self._resend_overdue(now)
        # A second timeout without a fresh RTT sample: the minimum RTT may date from a
        # congested start (seconds of queueing), and with it every retransmission's
        # ACK looks "too early" (see _mark_acked), so losses behind it are never
        # inferred and recovery crawls at one packet per timeout.  Forget it; the
        # next never-retransmitted packet gives a new one.
        self._rtos_unsampled += 1
        if self._rtos_unsampled >= 2:
            self._min_rtt = None
        self._rto = min(self.cfg.rto_max_s, self._rto * 2)
        self._rto_deadline = now + self._rto

    def _resend_oldest(self) -> None:
        """A timeout's resend: go-back-N from the oldest unacknowledged packet, else
        that packet alone."""
        if self.cfg.mode is Reliability.GBN:
            self._go_back(self._una)
            self.counters.timeouts += 1
        else:
            # resend only the oldest missing packet: once it is acknowledged, the
            # transmission-order rule finds every other loss, and a timer that fired
            # only because ACKs were late costs one packet instead of a window
            for s in range(self._una, self._sent_up_to):
                p = self._pkts.get(s)
                if p is None or p.acked:
                    continue
                if not p.queued:
                    p.queued = p.rto_retx = True
                    self._retx_q.appendleft(s)
                    self.counters.timeouts += 1
                break

    def _resend_overdue(self, now: float) -> None:
        """At a timeout, before the timer backs off again: if it already fired since the
        last progress (this is the second), every other unacknowledged packet sent at
        least a base timeout ago is resent too, not only the oldest.

        Why: the first timeout's single packet is the cheap probe (a timer that fired
        because ACKs were late costs one packet, not a window).  When a whole backed-off
        timeout passes without any progress, the packets still unacknowledged are lost,
        not late, and nothing later was acknowledged to reveal them (they are the tail
        of what was sent).  Resending one per timeout then takes one backed-off timeout
        per packet: a burst that swallowed the last 30 packets of a message costs ~30
        timeouts, and on a path whose losses come in bursts counted in packets (a
        Gilbert-Elliott channel, as netem and the project's loss emulator draw it) the
        lone resends keep meeting the same bad state (selective repeat took over 40 s
        for one message of the wan_recovery preset's ge:5%/30 cell at 60 ms).  TCP
        marks everything outstanding lost after a timeout (RFC 6675, section 5.1);
        this waits for the second one, and leaves what was sent within the last base
        timeout in flight.  Only once an RTT sample says what "overdue" means: before
        the first, a timer shorter than the path's round trip (seconds of queueing at a
        congested start) is the likelier reason, and resending everything would leave
        no packet whose ACK could give that sample (Karn)."""
        base = self._rto_value()
        if self.cfg.mode is Reliability.GBN or self._srtt is None or self._rto <= base:
            return  # go-back-N resent the window; no RTT sample; the first timeout
        for s in range(self._una, self._sent_up_to):
            p = self._pkts.get(s)
            if p is None or p.acked or p.queued or now - p.sent_s < base:
                continue
            p.queued = True
            self._retx_q.append(s)

    # -- reporting -------------------------------------------------------------------
    def _cc_snapshot(self) -> dict | None:
        if self._cc is None:
            return None
        out = {**self._cc.snapshot(), "window_pkts": self._win_pkts}
        if self._cc.wants_echo:
            out["echo_rejected"] = dict(self.echo_guard.rejected)
        return out

    def scheme_counts(self) -> dict[str, int]:
        """Messages per recovery scheme (mode auto)."""
        return recovery.scheme_counts(self.messages)

    def snapshot(self) -> dict:
        c = self.counters
        return {
            "qpn": self.qpn, "peer_qpn": self.cfg.peer_qpn, "peer_ip": self.cfg.peer_ip,
            "mode": self.cfg.mode.value, "rate_bps": self.cfg.rate_bps, "cc": self.cfg.cc,
            "rate_cap_bps": self._rate_cap_bps,
            # the algorithm's state under its snapshot key ("dcqcn", "hpcc" ...)
            **({self._cc.snapshot_key: self._cc_snapshot()} if self._cc is not None else {}),
            "fec_k": self.cfg.fec_k, "fec_m": self.cfg.fec_m,
            **({"path_loss_changes": [list(x) for x in self.path_loss_log[-100:]],
                "schemes": self.scheme_counts()}
               if self.cfg.mode is Reliability.AUTO else {}),
            "srtt_s": self._srtt, "rto_s": self._rto, "outstanding": self.outstanding,
            "path_notices": self.path_notices, "path_resends": self.path_resends,
            # the latest changes (time since endpoint start, value): feedback history
            "rate_changes": [list(x) for x in self.rate_log[-100:]],
            "fec_changes": [list(x) for x in self.fec_log[-100:]],
            **c.as_dict(),
        }
