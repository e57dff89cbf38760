"""Vectorised decoding of Telemetry Report v2.0 datagrams into REPORT/HOP arrays.

How it stays fast: every field of a report is 4-byte aligned, so datagrams of the
same length are stacked into one ``(n, words)`` uint32 matrix.  A handful of column
gathers read each row's shape (metadata length, IPv4 IHL, shim length, hop ML,
bitmaps); rows are grouped by shape, every shape is validated once, and the hop
fields of all rows of a shape are copied out with fixed column slices.  Python
work is per datagram (bucketing by length) and per distinct shape, never per hop
record.  Malformed datagrams are counted by ``Malformed`` reason and dropped.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from controller.int import native_reports
from controller.int.errors import Malformed
from controller.int.records import (
    FIELD_NODE_ID,
    HOP_DTYPE,
    REPORT_DTYPE,
    SOURCE_REPORT,
    DecodedBatch,
    as_pool,
    take,
)
from formats.int_fields import WordOffsets, word_offsets
from formats.int_md import INT_DS_ID_HPCC, INT_MD_VERSION, INT_SHIM_TYPE_MD, ROCEV2_UDP_PORT
from formats.telemetry_report import FIXED_LEN, IN_TYPE_IPV4, REP_TYPE_INT, REPORT_VERSION

_HDR_WORDS = FIXED_LEN // 4  # group (2) + individual (1) + main contents (2)
#: More reports than fit one datagram (each is at least 4 bytes behind an 8-byte
#: group header in at most 64 KiB): spaces the arrival positions of a pool's slots.
_PIECES = 1 << 14

#: Shape key columns, in order.
_KEY = (
    "rep_type",
    "in_type",
    "md_len",
    "rep_md_bits",
    "domain",
    "ds_md_bits",
    "ip_ver",
    "ihl",
    "proto",
    "shim_type",
    "shim_len",
    "md_ver",
    "hop_ml",
    "ins",
    "ds_id",
    "ds_ins",
)


@dataclass(slots=True, kw_only=True)
class DecodeStats:
    """Counters of a report decoder (monotonic; read by the collector's stats)."""

    datagrams: int = 0
    reports: int = 0
    hop_records: int = 0
    malformed: Counter = field(default_factory=Counter)  # Malformed -> count
    shapes: int = 0  # distinct bitmap combinations seen (layout cache size)


def _gather(m: np.ndarray, col: np.ndarray) -> np.ndarray:
    """m[i, col[i]] for every row, with out-of-range columns read as 0."""
    n, w = m.shape
    ok = col < w
    safe = np.where(ok, col, 0)
    out = m[np.arange(n), safe]
    out[~ok] = 0
    return out


def _split(data: bytes, out: dict[int, tuple[list[bytes], list[int]]], pos: int,
           stats: DecodeStats) -> int:
    """Cut a coalesced datagram into single-report datagrams (group header + report);
    returns the next arrival position."""
    n = len(data)
    head = data[:8]
    off = 8
    pieces = []
    while off < n:
        if off + 4 > n:
            stats.malformed[Malformed.REPORT_LENGTH] += 1
            return pos
        end = off + 4 + 4 * data[off + 1]
        if end > n:
            stats.malformed[Malformed.REPORT_LENGTH] += 1
            return pos
        pieces.append(head + data[off:end])
        off = end
    for p in pieces:
        rows, where = out.setdefault(len(p), ([], []))
        rows.append(p)
        where.append(pos)
        pos += 1
    return pos


class ReportDecoder:
    """Decodes batches of report datagrams; keeps counters and a layout cache."""

    def __init__(self) -> None:
        self.stats = DecodeStats()
        #: single reports of a receive pool through reports.c (False: numpy)
        self.native = native_reports.available()
        self._layouts: dict[tuple[int, ...], tuple[WordOffsets, WordOffsets]] = {}

    def decode(self, datagrams: Sequence[bytes], arrival_ns: int) -> DecodedBatch:
        """Decode ``datagrams`` (UDP payloads) received at ``arrival_ns``."""
        pool = as_pool(datagrams, FIXED_LEN)
        if pool is not None:      # one length: the socket path's decode, no loop
            return self.decode_pool(pool[0], pool[1], arrival_ns)
        st = self.stats
        st.datagrams += len(datagrams)
        buckets: dict[int, tuple[list[bytes], list[int]]] = {}
        bad = st.malformed
        pos = 0  # arrival position of each accepted report, to restore order at the end
        for d in datagrams:
            n = len(d)
            if n < FIXED_LEN:
                bad[Malformed.SHORT] += 1
            elif n & 3:
                bad[Malformed.UNALIGNED] += 1
            elif d[0] >> 4 != REPORT_VERSION:
                bad[Malformed.BAD_VERSION] += 1
            else:
                end = 12 + 4 * d[9]
                if end == n:
                    b = buckets.get(n)
                    if b is None:
                        buckets[n] = ([d], [pos])
                    else:
                        b[0].append(d)
                        b[1].append(pos)
                    pos += 1
                elif end < n:
                    pos = _split(d, buckets, pos, st)
                else:
                    bad[Malformed.REPORT_LENGTH] += 1
        parts = []
        for n, (rows, where) in buckets.items():
            m = np.frombuffer(b"".join(rows), dtype=">u4").reshape(len(rows), n // 4)
            parts.extend(self._decode_bucket(m.astype(np.uint32), np.asarray(where, np.int64),
                                             arrival_ns))
        return self._done(parts)

    def decode_pool(self, buf: np.ndarray, lens: np.ndarray, arrival_ns: int) -> DecodedBatch:
        """Decode the datagrams of a receive pool in place (``rxbatch.RxPool``: row i of
        ``buf`` holds ``lens[i]`` bytes; a length of 0 is a skipped slot).

        Same result and counters as ``decode`` of the same datagrams, without Python
        work per datagram: rows are checked and grouped by length with numpy, and the
        rows of one length are one matrix.  Coalesced datagrams (several reports
        behind one group header) take ``decode``'s path."""
        if self.native:
            return self._decode_pool_native(buf, lens, arrival_ns)
        st = self.stats
        lens = lens.astype(np.int64)
        live = lens > 0
        n = int(live.sum())
        st.datagrams += n
        if n == 0:
            return DecodedBatch.empty()
        bad = st.malformed
        short = live & (lens < FIXED_LEN)
        unaligned = live & ~short & ((lens & 3) != 0)
        rest = live & ~short & ~unaligned
        version_ok = (buf[:, 0] >> 4) == REPORT_VERSION
        bad_version = rest & ~version_ok
        rest &= version_ok
        end = 12 + 4 * buf[:, 9].astype(np.int64)
        too_long = rest & (end > lens)
        single = rest & (end == lens)
        coalesced = rest & (end < lens)
        for reason, mask in ((Malformed.SHORT, short), (Malformed.UNALIGNED, unaligned),
                             (Malformed.BAD_VERSION, bad_version),
                             (Malformed.REPORT_LENGTH, too_long)):
            k = int(mask.sum())
            if k:
                bad[reason] += k
        parts = []
        if coalesced.any():
            # arrival position of a report: slot * _PIECES + its place in the datagram
            buckets: dict[int, tuple[list[bytes], list[int]]] = {}
            for i in np.flatnonzero(coalesced).tolist():
                _split(bytes(buf[i, :lens[i]]), buckets, i * _PIECES, st)
            for ln, (rows, where) in buckets.items():
                m = np.frombuffer(b"".join(rows), dtype=">u4").reshape(len(rows), ln // 4)
                parts.extend(self._decode_bucket(m.astype(np.uint32),
                                                 np.asarray(where, np.int64), arrival_ns))
        idx = np.flatnonzero(single)
        if len(idx):
            ls = lens[idx]
            if (ls == ls[0]).all():
                groups = [(int(ls[0]), idx)]
            else:
                order = np.argsort(ls, kind="stable")
                cut = np.flatnonzero(np.diff(ls[order])) + 1
                groups = [(int(lens[g[0]]), g) for g in np.split(idx[order], cut)]
            for ln, sel in groups:
                m = np.ascontiguousarray(buf[sel, :ln]).view(">u4").astype(np.uint32)
                parts.extend(self._decode_bucket(m, sel.astype(np.int64) * _PIECES, arrival_ns))
        return self._done(parts)

    def _decode_pool_native(self, buf: np.ndarray, lens: np.ndarray, arrival_ns: int
                            ) -> DecodedBatch:
        """``decode_pool`` with the rows classified in C (reports.c) instead of a dozen
        column passes over the pool."""
        st = self.stats
        cls = native_reports.classify(buf, lens)
        counts = np.bincount(cls, minlength=7)
        st.datagrams += len(cls) - int(counts[0])
        bad = st.malformed
        for reason, c in ((Malformed.SHORT, 1), (Malformed.UNALIGNED, 2),
                          (Malformed.BAD_VERSION, 3), (Malformed.REPORT_LENGTH, 4)):
            if counts[c]:
                bad[reason] += int(counts[c])
        if len(cls) == int(counts[0]):
            return DecodedBatch.empty()
        parts = []
        if counts[6]:
            lens64 = lens.astype(np.int64)
            buckets: dict[int, tuple[list[bytes], list[int]]] = {}
            for i in np.flatnonzero(cls == 6).tolist():
                _split(bytes(buf[i, :lens64[i]]), buckets, i * _PIECES, st)
            for ln, (rows, where) in buckets.items():
                m = np.frombuffer(b"".join(rows), dtype=">u4").reshape(len(rows), ln // 4)
                parts.extend(self._decode_bucket(m.astype(np.uint32),
                                                 np.asarray(where, np.int64), arrival_ns))
        if counts[5]:
            parts.extend(self._decode_native(buf, lens, np.flatnonzero(cls == 5), arrival_ns))
        return self._done(parts)

    def _decode_native(self, buf: np.ndarray, lens: np.ndarray, idx: np.ndarray,
                       arrival_ns: int) -> list[tuple[DecodedBatch, np.ndarray]]:
        """``decode_pool``'s single reports through reports.c: the shape key of every
        row read in C, the checks once per shape, the records copied in C."""
        lens32 = lens.astype(np.uint32)
        short = lens[idx] <= 4 * _HDR_WORDS          # no room past the fixed header
        if short.any():
            self.stats.malformed[Malformed.INNER_TRUNCATED] += int(short.sum())
            idx = idx[~short]
            if not len(idx):
                return []
        keys = native_reports.scan(buf, lens32, idx)
        if (keys == keys[0]).all():
            groups: list[tuple[np.ndarray, np.ndarray]] = [(keys[0], idx)]
        else:
            uniq, inv = np.unique(keys, axis=0, return_inverse=True)
            inv = inv.reshape(-1)
            order = np.argsort(inv, kind="stable")
            bounds = np.searchsorted(inv[order], np.arange(1, len(uniq)))
            groups = [(u, idx[o]) for u, o in zip(uniq, np.split(order, bounds))]
        parts = []
        for k, rows in groups:
            key = tuple(int(v) for v in k[:-1])
            words = int(k[-1])
            reason = self._check_shape(key, words)
            if reason is not None:
                self.stats.malformed[reason] += len(rows)
                continue
            (_rt, _it, md_len, _rmb, _dom, _dmb, _iv, ihl, _pr, _st, shim_len, _mv, hop_ml,
             ins, _dsid, ds_ins) = key
            sink, hop = self._layouts_for(key)
            ip0 = _HDR_WORDS + md_len
            shim_col = ip0 + ihl + 2
            stack_col = shim_col + 4
            stack_words = shim_len - 3
            n_stack = stack_words // hop_ml if hop_ml else 0
            has_sink = bool(sink.fields)
            n_hops = n_stack + (1 if has_sink else 0)
            bth = stack_col + stack_words
            geometry = np.array([ip0, ihl, shim_col, stack_col, hop_ml, n_stack, has_sink,
                                 bth + 3 <= words, bth, n_hops, ins, ds_ins, SOURCE_REPORT,
                                 ROCEV2_UDP_PORT, native_reports.NODE_FLAG], np.int64)
            samples, hops = native_reports.fill(buf, lens32, rows, arrival_ns, geometry, hop,
                                                sink, n_hops)
            parts.append((DecodedBatch(samples=samples, hops=hops),
                          rows.astype(np.int64) * _PIECES))
        return parts

    def _done(self, parts: list[tuple[DecodedBatch, np.ndarray]]) -> DecodedBatch:
        out = _in_arrival_order(parts)
        self.stats.reports += len(out.samples)
        self.stats.hop_records += len(out.hops)
        return out

    # -- one length --------------------------------------------------------------

    def _decode_bucket(self, m: np.ndarray, where: np.ndarray,
                       arrival_ns: int) -> list[tuple[DecodedBatch, np.ndarray]]:
        """Reports of one length, ``m`` a (reports, words) uint32 matrix in host order."""
        words = m.shape[1]
        if words <= _HDR_WORDS:
            self.stats.malformed[Malformed.INNER_TRUNCATED] += len(m)
            return []
        k: dict[str, np.ndarray] = {}
        w2, w3, w4 = m[:, 2], m[:, 3], m[:, 4]
        k["rep_type"] = w2 >> 28
        k["in_type"] = (w2 >> 24) & 0xF
        md_len = (w2 >> 8) & 0xFF
        k["md_len"] = md_len
        k["rep_md_bits"] = w3 >> 16
        k["domain"] = w3 & 0xFFFF
        k["ds_md_bits"] = w4 >> 16
        ip0 = _HDR_WORDS + md_len
        ipw0 = _gather(m, ip0)
        k["ip_ver"] = ipw0 >> 28
        ihl = (ipw0 >> 24) & 0xF
        k["ihl"] = ihl
        k["proto"] = (_gather(m, ip0 + 2) >> 16) & 0xFF
        shim_col = ip0 + ihl + 2
        shim = _gather(m, shim_col)
        k["shim_type"] = shim >> 28
        k["shim_len"] = (shim >> 16) & 0xFF
        md0 = _gather(m, shim_col + 1)
        md1 = _gather(m, shim_col + 2)
        k["md_ver"] = md0 >> 28
        k["hop_ml"] = (md0 >> 8) & 0x1F
        k["ins"] = md1 >> 16
        k["ds_id"] = md1 & 0xFFFF
        k["ds_ins"] = _gather(m, shim_col + 3) >> 16
        keys = np.stack([k[c] for c in _KEY], axis=1)
        groups: list[tuple[np.ndarray, np.ndarray | None]]
        if (keys == keys[0]).all():
            groups = [(keys[0], None)]
        else:
            uniq, inv = np.unique(keys, axis=0, return_inverse=True)
            order = np.argsort(inv.reshape(-1), kind="stable")
            bounds = np.searchsorted(inv.reshape(-1)[order], np.arange(1, len(uniq)))
            groups = list(zip(uniq, np.split(order, bounds)))
        parts = []
        for key, idx in groups:
            sub = m if idx is None else m[idx]
            got = self._decode_shape(tuple(int(v) for v in key), sub, arrival_ns)
            if len(got.samples):
                parts.append((got, where if idx is None else where[idx]))
        return parts

    # -- one shape ----------------------------------------------------------------

    def _layouts_for(self, key: tuple[int, ...]) -> tuple[WordOffsets, WordOffsets]:
        """(sink metadata layout, hop record layout) of a shape, cached by its bitmaps."""
        bitmaps = (key[3], key[4], key[5], key[13], key[14], key[15])
        got = self._layouts.get(bitmaps)
        if got is None:
            rep_md_bits, domain, ds_md_bits, ins, ds_id, ds_ins = bitmaps
            got = (
                word_offsets(rep_md_bits, ds_md_bits, ds_known=domain == INT_DS_ID_HPCC,
                             report=True),
                word_offsets(ins, ds_ins, ds_known=ds_id == INT_DS_ID_HPCC),
            )
            if len(self._layouts) < 4096:
                self._layouts[bitmaps] = got
                self.stats.shapes = len(self._layouts)
        return got

    def _check_shape(self, key: tuple[int, ...], words: int) -> Malformed | None:
        """Why reports of this shape and length are dropped, or None when they decode."""
        (rep_type, in_type, md_len, _rep_md_bits, _domain, _ds_md_bits, ip_ver, ihl, proto,
         shim_type, shim_len, md_ver, hop_ml, _ins, _ds_id, _ds_ins) = key
        sink, hop = self._layouts_for(key)
        ip0 = _HDR_WORDS + md_len
        shim_col = ip0 + ihl + 2
        stack_col = shim_col + 4
        stack_words = shim_len - 3
        if rep_type != REP_TYPE_INT:
            return Malformed.UNSUPPORTED_REPORT_TYPE
        if in_type != IN_TYPE_IPV4:
            return Malformed.UNSUPPORTED_INNER_TYPE
        if md_len != sink.words:
            return Malformed.MD_LENGTH
        if ip0 + 5 > words:
            return Malformed.INNER_TRUNCATED
        if ip_ver != 4 or ihl < 5:
            return Malformed.BAD_IPV4
        if proto != 17:
            return Malformed.NOT_UDP
        if shim_col + 1 > words:
            return Malformed.INNER_TRUNCATED
        if shim_type != INT_SHIM_TYPE_MD:
            return Malformed.NOT_INT_MD
        if shim_len < 3:
            return Malformed.BAD_SHIM
        if stack_col > words:
            return Malformed.INNER_TRUNCATED
        if md_ver != INT_MD_VERSION:
            return Malformed.BAD_MD_VERSION
        if hop_ml != hop.words or (hop_ml == 0 and stack_words) or (
            hop_ml and stack_words % hop_ml
        ):
            return Malformed.HOP_ML_MISMATCH
        if stack_col + stack_words > words:
            return Malformed.INNER_TRUNCATED
        return None

    def _decode_shape(self, key: tuple[int, ...], m: np.ndarray, arrival_ns: int) -> DecodedBatch:
        (_rep_type, _in_type, md_len, _rep_md_bits, _domain, _ds_md_bits, _ip_ver, ihl,
         _proto, _shim_type, shim_len, _md_ver, hop_ml, ins, _ds_id, ds_ins) = key
        n, words = m.shape
        sink, hop = self._layouts_for(key)
        ip0 = _HDR_WORDS + md_len
        shim_col = ip0 + ihl + 2
        stack_col = shim_col + 4
        stack_words = shim_len - 3
        reason = self._check_shape(key, words)
        if reason is not None:
            self.stats.malformed[reason] += n
            return DecodedBatch.empty()

        n_stack = stack_words // hop_ml if hop_ml else 0
        has_sink = bool(sink.fields)
        n_hops = n_stack + (1 if has_sink else 0)

        samples = np.zeros(n, REPORT_DTYPE)
        samples["arrival_ns"] = arrival_ns
        samples["source"] = SOURCE_REPORT
        samples["reporter"] = m[:, 1]
        samples["seq"] = m[:, 0] & 0x3FFFFF
        samples["src_ip"] = m[:, ip0 + 3]
        samples["dst_ip"] = m[:, ip0 + 4]
        udp0 = m[:, ip0 + ihl]
        samples["sport"] = udp0 >> 16
        orig_dport = m[:, shim_col] & 0xFFFF
        samples["dport"] = orig_dport
        samples["hop_count"] = n_hops
        samples["e_bit"] = (m[:, shim_col + 1] >> 26) & 1
        samples["ins_bitmap"] = ins
        samples["ds_bitmap"] = ds_ins
        bth = stack_col + stack_words
        if bth + 3 <= words:
            is_roce = orig_dport == ROCEV2_UDP_PORT
            samples["has_bth"] = is_roce
            samples["opcode"] = np.where(is_roce, m[:, bth] >> 24, 0)
            samples["dest_qp"] = np.where(is_roce, m[:, bth + 1] & 0xFFFFFF, 0)
            samples["psn"] = np.where(is_roce, m[:, bth + 2] & 0xFFFFFF, 0)

        hops = np.zeros(n * n_hops, HOP_DTYPE)
        if n_hops:
            view = hops.reshape(n, n_hops)
            view["sample"] = np.arange(n, dtype=np.uint32)[:, None]
            view["hop_index"] = np.arange(n_hops, dtype=np.uint8)[None, :]
            for k in range(n_stack):
                _fill(view[:, n_stack - 1 - k], m, stack_col + k * hop_ml, hop)
            if has_sink:
                last = view[:, n_hops - 1]
                _fill(last, m, _HDR_WORDS, sink)
                last["node_id"] = m[:, 1]
                last["fields"] |= FIELD_NODE_ID
        return DecodedBatch(samples=samples, hops=hops)


def _in_arrival_order(parts: list[tuple[DecodedBatch, np.ndarray]]) -> DecodedBatch:
    """Join per-shape results, samples back in arrival order (hops follow their sample)."""
    if not parts:
        return DecodedBatch.empty()
    if len(parts) == 1:
        return parts[0][0]
    out = DecodedBatch.concat([p for p, _ in parts])
    where = np.concatenate([w for _, w in parts])
    order = np.argsort(where, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    out.samples = take(out.samples, order)
    h = out.hops
    h["sample"] = rank[h["sample"]]
    out.hops = take(h, np.argsort(h["sample"], kind="stable"))
    return out


def _fill(dst: np.ndarray, m: np.ndarray, base: int, layout: WordOffsets) -> None:
    """Copy the rows of one record position (column ``base``) of every row of ``m``
    into ``dst``, part by part as ``formats.int_fields`` packs them."""
    flags = 0
    for f, off in layout.fields:
        flags |= f.flag
        col = m[:, base + off]
        if f.words == 2:
            col = (col.astype(np.uint64) << np.uint64(32)) | m[:, base + off + 1]
        for p, sh in zip(f.parts, f.shifts()):
            if sh == 0 and p.bits == f.nbits:
                dst[p.col] = col
            else:
                dst[p.col] = (col >> col.dtype.type(sh)) & col.dtype.type((1 << p.bits) - 1)
    dst["fields"] = flags


__all__ = ["DecodeStats", "ReportDecoder"]
