"""Responder side of an RC QP: PSN checking, reassembly, ACK/NAK/SACK, FEC repair.

Pure state machine like :mod:`traffic.requester`.  Data is delivered strictly in PSN
order (selective-repeat QPs buffer out-of-order packets up to the window first), so
message reassembly and the MSN stay simple; an RDMA WRITE lands in a per-message buffer
sized by the RETH DMA length, and its CRC-32 is recorded for integrity checks.

ACK format: BTH PSN = last PSN received in order, AETH = ACK + MSN; selective-repeat QPs
append a SACK block (formats.roce) when packets are buffered out of order.  NAK: BTH
PSN = expected PSN, AETH = NAK sequence error, sent once per expected PSN (go-back-N).
"""
from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from formats import roce
from formats.roce import PSN_MASK, AethSyndrome, Opcode, PacketTemplate
from traffic import fec_codec as fec
from traffic import recovery
from traffic.errors import FecError
from traffic.qp_types import (
    MessageRecord,
    QpConfig,
    QpCounters,
    Reliability,
    decode_symbol,
    encode_symbol,
)

__all__ = ["Responder"]

#: how many delivered symbols to keep for FEC decoding: two of the largest blocks or
#: interleaved groups (traffic.recovery)
_KEEP_SYMBOLS = 2 * max(fec.MAX_K, recovery.MAX_GROUP)
#: a PSN further than this many windows ahead of the expected PSN is bogus
_FAR = 4


@dataclass(slots=True)
class _RepairSet:
    count: int
    m: int
    symbol_len: int
    repairs: dict
    stride: int = 1

    @property
    def last(self) -> int:
        """Offset of the block's last data packet from its base."""
        return (self.count - 1) * self.stride


@dataclass(slots=True, kw_only=True)
class Responder:
    """Receives RDMA WRITEs on one QP and produces the acknowledgements."""

    cfg: QpConfig
    local_ip: str
    sport: int
    start_psn: int = 0
    on_message: Callable[[Responder, MessageRecord, bytearray], None] | None = None
    keep_data: bool = False
    counters: QpCounters = field(default_factory=QpCounters)
    messages: list[MessageRecord] = field(default_factory=list)
    _tmpl: PacketTemplate = field(init=False)
    _e: int = 0  # expected sequence (absolute)
    _msn: int = 0
    _nak_for: int = -1
    _ack_due: bool = False
    _nak_due: bool = False
    _ooo: dict = field(default_factory=dict)  # seq -> (opcode, reth, payload)
    _recent: dict = field(default_factory=dict)  # seq -> symbol (FEC mode)
    _repairs: dict = field(default_factory=dict)  # base seq -> _RepairSet
    _cur: bytearray | None = None
    _cur_off: int = 0
    _cur_msg: MessageRecord | None = None
    _msg_id: int = 0
    now_s: float = 0.0

    def __post_init__(self) -> None:
        self._tmpl = PacketTemplate(src=self.local_ip, dst=self.cfg.peer_ip, sport=self.sport)
        if self.cfg.mode.coded:
            fec.prepare(self.cfg.fec_k, self.cfg.fec_m)

    @property
    def qpn(self) -> int:
        return self.cfg.qpn

    @property
    def msn(self) -> int:
        return self._msn

    @property
    def expected_psn(self) -> int:
        return (self.start_psn + self._e) & PSN_MASK

    def _abs(self, psn: int) -> int:
        return self._e + roce.psn_diff(psn, self.expected_psn)

    # -- receive -----------------------------------------------------------------------
    def on_packet(self, pkt: roce.RocePacket, now: float) -> None:
        """Process one data or FEC repair packet (ICRC and peer already checked)."""
        self.now_s = now
        c = self.counters
        c.rx_pkts += 1
        op = pkt.bth.opcode
        seq = self._abs(pkt.bth.psn)
        limit = _FAR * self.cfg.window_pkts
        if op == Opcode.FEC_REPAIR:
            if pkt.fec is None or not self.cfg.mode.coded:
                c.bad_opcode += 1
                return
            if not -limit <= seq - self._e <= limit:
                c.psn_out_of_window += 1
                return
            self._on_repair(seq, pkt.fec, pkt.payload)
            return
        if op not in roce.DATA_OPCODES:
            c.bad_opcode += 1
            return
        if len(pkt.payload) > self.cfg.mtu or (
            op in (Opcode.WRITE_FIRST, Opcode.WRITE_MIDDLE) and len(pkt.payload) != self.cfg.mtu
        ):
            c.bad_length += 1
            return
        d = seq - self._e
        if d > limit or d < -limit:
            c.psn_out_of_window += 1
            return
        c.rx_data_pkts += 1
        reth = None
        if pkt.reth is not None:
            r = pkt.reth
            if not len(pkt.payload) <= r.dma_length <= self.cfg.max_msg_bytes:
                c.bad_length += 1  # refuse absurd DMA lengths before taking the PSN
                return
            reth = roce.pack_reth(r.va, r.r_key, r.dma_length)
        self._accept(seq, op, reth, pkt.payload, repaired=False)

    def _accept(self, seq: int, op: int, reth: bytes | None, payload: bytes,
                *, repaired: bool) -> None:
        c = self.counters
        mode = self.cfg.mode
        if (mode.coded and seq >= self._e - _KEEP_SYMBOLS
                and seq not in self._recent):
            self._recent[seq] = encode_symbol(op, reth, payload)
        if seq < self._e or seq in self._ooo:
            c.duplicates += 1
            self._ack_due = True
            return
        if seq > self._e:
            if mode is Reliability.GBN:
                c.ooo_dropped += 1
                if self._nak_for != self._e:
                    self._nak_for = self._e
                    self._nak_due = True
                    self._ack_due = True
                return
            if seq - self._e >= self.cfg.window_pkts * 2:
                c.psn_out_of_window += 1
                return
            self._ooo[seq] = (op, reth, payload, repaired)
            c.ooo_buffered += 1
            self._ack_due = True
            if mode.coded:
                self._try_repair_all()
            return
        if (op in roce.FIRST_OPCODES) != (self._cur is None):
            # a FIRST/ONLY inside a message, or a MIDDLE/LAST outside one: refuse it
            # without taking the PSN, so the genuine packet is still accepted
            c.bad_opcode += 1
            if mode.coded:
                self._recent.pop(seq, None)
            return
        self._deliver(op, reth, payload, repaired)
        self._e += 1
        while self._e in self._ooo:
            self._deliver(*self._ooo.pop(self._e))
            self._e += 1
        self._ack_due = True
        if mode.coded:
            self._trim_fec_state()

    def _deliver(self, op: int, reth: bytes | None, payload: bytes, repaired: bool) -> None:
        c = self.counters
        if op in roce.FIRST_OPCODES:
            if self._cur is not None:
                c.bad_opcode += 1  # previous message never finished
            size = roce.unpack_reth(reth).dma_length if reth else len(payload)
            if size > self.cfg.max_msg_bytes or size < len(payload):
                c.bad_length += 1  # refuse absurd DMA lengths instead of allocating them
                self._cur = self._cur_msg = None
                return
            self._msg_id += 1
            self._cur_msg = MessageRecord(msg_id=self._msg_id, size=size, posted_s=self.now_s)
            self._cur = bytearray(size)
            self._cur_off = 0
        if self._cur is None or self._cur_msg is None:
            c.bad_opcode += 1  # MIDDLE/LAST without a FIRST
            return
        end = self._cur_off + len(payload)
        if end > len(self._cur):
            c.bad_length += 1
            self._cur = self._cur_msg = None
            return
        self._cur[self._cur_off:end] = payload
        self._cur_off = end
        if repaired:
            self._cur_msg.fec_repaired += 1
        c.delivered_bytes += len(payload)
        if op in roce.LAST_OPCODES:
            msg, buf = self._cur_msg, self._cur
            self._cur = self._cur_msg = None
            if self._cur_off != len(buf):
                c.bad_length += 1
                return
            msg.done_s = self.now_s
            msg.crc32 = zlib.crc32(buf)
            self._msn = (self._msn + 1) & PSN_MASK
            c.msgs_done += 1
            self.messages.append(msg)
            if self.on_message is not None:
                self.on_message(self, msg, buf)

    # -- FEC ---------------------------------------------------------------------------
    def _on_repair(self, base: int, hdr: roce.FecHeader, sym: bytes) -> None:
        if hdr.data_count < 1 or hdr.index >= hdr.m or len(sym) != hdr.symbol_len:
            self.counters.bad_length += 1
            return
        stride = max(1, hdr.stride)
        if base + (hdr.data_count - 1) * stride < self._e:
            return  # whole block already delivered
        rs = self._repairs.get(base)
        if rs is None:
            rs = self._repairs[base] = _RepairSet(hdr.data_count, hdr.m, hdr.symbol_len, {},
                                                  stride)
        rs.repairs[hdr.index] = sym
        self._try_repair(base)

    def _try_repair_all(self) -> None:
        for base in list(self._repairs):
            self._try_repair(base)

    def _try_repair(self, base: int) -> None:
        rs = self._repairs.get(base)
        if rs is None:
            return
        # cheap count first: called for every out-of-order packet and every pending
        # block (interleaved groups keep several open), most calls cannot decode yet
        recent, ooo = self._recent, self._ooo
        absent = [base + i * rs.stride for i in range(rs.count)]
        absent = [q for q in absent if q not in recent and q not in ooo]
        if absent and absent[0] >= self._e and len(absent) > len(rs.repairs):
            return
        have: dict[int, bytes] = {}
        for i in range(rs.count):
            seq = base + i * rs.stride
            s = self._recent.get(seq)
            if s is None and seq in self._ooo:
                s = encode_symbol(*self._ooo[seq][:3])
            if s is not None:
                have[i] = s + bytes(rs.symbol_len - len(s)) if len(s) < rs.symbol_len else s
            elif seq < self._e:
                # delivered but its symbol was trimmed: cannot help this block any more
                del self._repairs[base]
                return
        missing = rs.count - len(have)
        if missing == 0:
            del self._repairs[base]
            return
        if missing > len(rs.repairs):
            return
        try:
            rec = fec.decode(rs.count, rs.m, have, rs.repairs)
        except FecError:
            self.counters.bad_length += 1
            del self._repairs[base]
            return
        del self._repairs[base]
        self.counters.fec_blocks_decoded += 1
        for i, sym in sorted(rec.items()):
            op, reth, payload = decode_symbol(sym)
            self.counters.fec_repaired += 1
            self._accept(base + i * rs.stride, op, reth, payload, repaired=True)

    def _trim_fec_state(self) -> None:
        lo = self._e - _KEEP_SYMBOLS
        if len(self._recent) > 2 * _KEEP_SYMBOLS:
            for s in [s for s in self._recent if s < lo]:
                del self._recent[s]
        if self._repairs:
            for b in [b for b, rs in self._repairs.items() if b + rs.last < self._e]:
                del self._repairs[b]

    # -- acknowledgements ---------------------------------------------------------------
    def take_ack(self) -> bytes | None:
        """The ACK/NAK/SACK payload owed to the requester, or None (clears the debt)."""
        if not self._ack_due:
            return None
        self._ack_due = False
        c = self.counters
        peer = self.cfg.peer_qpn
        if self._nak_due:
            self._nak_due = False
            c.naks_tx += 1
            buf = bytearray(roce.pack_bth(Opcode.ACKNOWLEDGE, peer, self.expected_psn)
                            + roce.pack_aeth(AethSyndrome.NAK_PSN_SEQ_ERROR, self._msn)
                            + bytes(4))
            return bytes(self._tmpl.finish(buf))
        extra = b""
        if self._ooo and self.cfg.mode is not Reliability.GBN:
            extra = self._sack_block()
        c.acks_tx += 1
        buf = bytearray(roce.pack_bth(Opcode.ACKNOWLEDGE, peer, (self.expected_psn - 1) & PSN_MASK)
                        + roce.pack_aeth(AethSyndrome.ACK, self._msn) + extra + bytes(4))
        return bytes(self._tmpl.finish(buf))

    def _sack_block(self) -> bytes:
        base = self._e + 1
        hi = max(self._ooo)
        nbits = min(hi - base + 1, 255 * 32)
        words = (nbits + 31) // 32
        bits = np.zeros(words * 32, dtype=np.uint8)
        idx = np.fromiter((s - base for s in self._ooo if 0 <= s - base < nbits), dtype=np.int64)
        bits[idx] = 1
        return roce.pack_sack((self.start_psn + base) & PSN_MASK, np.packbits(bits).tobytes())

    def snapshot(self) -> dict:
        return {
            "qpn": self.qpn, "peer_qpn": self.cfg.peer_qpn, "peer_ip": self.cfg.peer_ip,
            "mode": self.cfg.mode.value, "msn": self._msn, "expected_psn": self.expected_psn,
            "ooo_now": len(self._ooo), **self.counters.as_dict(),
        }
