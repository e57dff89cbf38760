"""Per-hop and per-flow telemetry state in bounded numpy tables with ring buffers.

``HopTable`` — one slot per hop, a hop being (switch node ID, egress port).
Latest values live in 1-D arrays indexed by slot; history lives in
``(capacity, depth)`` rings.  The tx rate of a hop is the tx-bytes delta (modulo
2^32) over the egress-timestamp delta of consecutive samples of that hop, in
egress-timestamp order.

``FlowTable`` — one slot per flow, a flow being (IPv4 source, IPv4 destination,
UDP source port, destination QP).  Holds the path (node ID and egress port per
hop position, plus the HopTable slot of each hop, -1 when absent), sample count,
last PSN and last update, and a history ring per flow (arrival time, PSN, largest
queue on the path, summed hop latency); flows idle longer than ``ttl_ns`` age out.

Consumers (HPCC in controller.cc, loss maps, export) read ``snapshot()`` copies:
plain arrays, documented on ``HopSnapshot`` and ``FlowSnapshot``; a flow's per-hop
state is ``hops.<field>[flows.path_slot[f]]`` (mask ``path_slot >= 0``).
All updates are vectorised over a batch, the key -> slot lookups too
(``controller.int.slots.SlotMap``): no Python work per record or per flow.  After
the lookup, the per-record work runs in C when gcc is there
(``controller.int.native_tables``, one pass instead of some thirty numpy passes and
scattered ring writes); ``native=False`` keeps the numpy path (same results).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from controller.int import native_tables
from controller.int.errors import ConfigError
from controller.int.records import (
    FIELD_EGRESS_TS,
    FIELD_HOP_LATENCY,
    FIELD_LINE_RATE,
    FIELD_QUEUE,
    FIELD_QUEUE_BYTES,
    FIELD_TX_BYTES,
    HOP_DTYPE,
    REPORT_DTYPE,
    take,
)
from controller.int.slots import SlotMap

MAX_PATH_HOPS = 16
_U32 = np.uint64(1 << 32)


def _check(name: str, value: int, lo: int, hi: int) -> None:
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={value} is outside {lo}..{hi}")


@dataclass(slots=True, kw_only=True)
class HopSnapshot:
    """Copy of the hop table's live slots (arrays of equal length n_hops).

    node_id, egress_port: the hop's identity.  qlen_bytes / qlen_pkts: last queue
    occupancy.  tx_bytes: last tx-bytes counter (mod 2^32).  tx_rate_bps: last
    rate from tx-bytes deltas (NaN until two samples).  line_rate_bps: port rate.
    hop_latency_ns: last hop latency.  egress_ts_us: last egress timestamp.
    last_update_ns: collector time of the last sample.  samples: count.
    slot: table slot (what FlowSnapshot.path_slot refers to).
    """

    slot: np.ndarray
    node_id: np.ndarray
    egress_port: np.ndarray
    qlen_bytes: np.ndarray
    qlen_pkts: np.ndarray
    tx_bytes: np.ndarray
    tx_rate_bps: np.ndarray
    line_rate_bps: np.ndarray
    hop_latency_ns: np.ndarray
    egress_ts_us: np.ndarray
    last_update_ns: np.ndarray
    samples: np.ndarray


@dataclass(slots=True, kw_only=True)
class FlowSnapshot:
    """Copy of the flow table's live slots (arrays of equal length n_flows).

    src_ip, dst_ip, sport, dest_qp: flow key.  hop_count: hops on the last path.
    path_node / path_port / path_slot: (n_flows, MAX_PATH_HOPS), position 0 is the
    INT source switch; path_slot indexes HopTable slots (-1 = no hop).
    samples: telemetry samples seen, last_psn, path_changes, first/last_update_ns.
    """

    slot: np.ndarray
    src_ip: np.ndarray
    dst_ip: np.ndarray
    sport: np.ndarray
    dest_qp: np.ndarray
    hop_count: np.ndarray
    path_node: np.ndarray
    path_port: np.ndarray
    path_slot: np.ndarray
    samples: np.ndarray
    last_psn: np.ndarray
    path_changes: np.ndarray
    first_update_ns: np.ndarray
    last_update_ns: np.ndarray


def _newest(rank: np.ndarray, sizes: np.ndarray, group: np.ndarray, depth: int
            ) -> np.ndarray | slice:
    """Records (by ``rank`` in their ``group``, of ``sizes``) that a ring of ``depth``
    keeps: all of them unless a group outgrows the ring."""
    if sizes.max() <= depth:
        return slice(None)
    return rank >= sizes[group] - depth


class HopTable:
    """Latest values and history rings per hop (switch, egress port)."""

    def __init__(self, *, capacity: int = 4096, depth: int = 256,
                 native: bool | None = None) -> None:
        _check("HopTable.capacity", capacity, 1, 1 << 22)
        _check("HopTable.depth", depth, 1, 1 << 16)
        self.capacity, self.depth = capacity, depth
        #: per-record work in tables.c (None: when it builds)
        self.native = native_tables.available() if native is None else native
        self._slots = SlotMap(capacity, 1)
        c = capacity
        self.node_id = np.zeros(c, np.uint32)
        self.egress_port = np.zeros(c, np.uint16)
        self.qlen_bytes = np.zeros(c, np.uint32)
        self.qlen_pkts = np.zeros(c, np.uint32)
        self.tx_bytes = np.zeros(c, np.uint32)
        self.has_tx = np.zeros(c, bool)
        self.tx_rate_bps = np.full(c, np.nan)
        self.line_rate_bps = np.zeros(c, np.uint64)
        self.hop_latency_ns = np.zeros(c, np.uint64)
        self.egress_ts_us = np.zeros(c, np.uint64)
        self.last_update_ns = np.zeros(c, np.int64)
        self.samples = np.zeros(c, np.uint64)
        self.write_pos = np.zeros(c, np.uint64)
        #: History rings, (capacity, depth); position (write_pos - 1) % depth is newest.
        self.ring_ts_us = np.zeros((c, depth), np.uint64)
        self.ring_qlen_bytes = np.zeros((c, depth), np.uint32)
        self.ring_qlen_pkts = np.zeros((c, depth), np.uint32)
        self.ring_tx_rate_bps = np.full((c, depth), np.nan)
        self.ring_hop_latency_ns = np.zeros((c, depth), np.uint64)

    def __len__(self) -> int:
        return len(self._slots)

    def slot_of(self, node_id: int, egress_port: int) -> int | None:
        return self._slots.find(((node_id << 16) | egress_port,))

    def update(self, hops: np.ndarray, arrival_ns: np.ndarray) -> np.ndarray:
        """Account HOP_DTYPE records (``arrival_ns`` per record); returns their slots."""
        n = len(hops)
        if n == 0:
            return np.zeros(0, np.int64)
        grouped = native_tables.hop_group(hops) \
            if self.native and hops.dtype == HOP_DTYPE else None
        if grouped is not None:       # C: keys, a counting sort, the timestamps checked
            order, starts, uniq = grouped
        ts = hops["egress_ts_us"]   # a view
        if grouped is None:
            key = (hops["node_id"].astype(np.uint64) << np.uint64(16)) | hops["egress_port"]
            order = np.lexsort((ts, key))
            ks = key[order]
            starts = np.flatnonzero(np.concatenate(([True], ks[1:] != ks[:-1])))
            uniq = ks[starts]
        slots_u, new = self._slots.lookup(uniq[None, :], self.last_update_ns)
        if new.any():
            s_new = slots_u[new]
            u_new = uniq[new]
            self.node_id[s_new] = u_new >> np.uint64(16)
            self.egress_port[s_new] = u_new & np.uint64(0xFFFF)
            self.has_tx[s_new] = False
            self.tx_rate_bps[s_new] = np.nan
            self.samples[s_new] = 0
            self.write_pos[s_new] = 0
            self.ring_tx_rate_bps[s_new] = np.nan
            for arr in (self.qlen_bytes, self.qlen_pkts, self.line_rate_bps, self.hop_latency_ns,
                        self.egress_ts_us, self.tx_bytes):
                arr[s_new] = 0
        # more hops than slots in one round share slots (SlotMap evicts within the
        # batch): a table overflow the numpy path handles, the C pass does not
        if self.native and hops.dtype == HOP_DTYPE and len(uniq) <= self.capacity:
            return native_tables.hop_update(self, hops, arrival_ns, order, starts, slots_u, new)
        group = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, n)))
        slot_sorted = slots_u[group]
        # the sorted columns this needs, not whole records: queue and latency are
        # only read for the records the rings keep and the last of each hop
        f = hops["fields"][order]
        ts_o = ts[order]
        tx_o = hops["tx_bytes"][order]
        rate = np.full(n, np.nan)
        has_tx = (f & FIELD_TX_BYTES).astype(bool) & (f & FIELD_EGRESS_TS).astype(bool)
        if has_tx.any():
            first = np.zeros(n, bool)
            first[starts] = True
            prev_tx = np.empty(n, np.uint64)
            prev_ts = np.empty(n, np.uint64)
            prev_ok = np.empty(n, bool)
            prev_tx[1:] = tx_o[:-1]
            prev_ts[1:] = ts_o[:-1]
            prev_ok[1:] = has_tx[:-1]
            prev_tx[first] = self.tx_bytes[slot_sorted[first]]
            prev_ts[first] = self.egress_ts_us[slot_sorted[first]]
            prev_ok[first] = self.has_tx[slot_sorted[first]]
            cur_ts = ts_o
            ok = has_tx & prev_ok & (cur_ts > prev_ts)
            with np.errstate(over="ignore"):
                dbytes = (tx_o.astype(np.uint64) - prev_tx) % _U32
                dts = cur_ts - prev_ts
            rate[ok] = dbytes[ok].astype(np.float64) * 8e6 / dts[ok].astype(np.float64)
        # latest values: the last record of each group wins (sorted by ts within the
        # group), unless it is older than what the table holds (a late sample)
        last = np.append(starts[1:], n) - 1
        hl_all = take(hops, order[last])
        self.last_update_ns[slots_u] = arrival_ns[order[last]]
        self.samples[slots_u] += np.diff(np.append(starts, n)).astype(np.uint64)
        has_ts = (hl_all["fields"] & FIELD_EGRESS_TS).astype(bool)
        fresh = new | ~has_ts | (hl_all["egress_ts_us"] >= self.egress_ts_us[slots_u])
        s_last = slots_u[fresh]
        hl = take(hl_all, fresh)
        fl = hl["fields"]
        last = last[fresh]
        m = (fl & FIELD_QUEUE_BYTES).astype(bool)
        self.qlen_bytes[s_last[m]] = hl["queue_bytes"][m]
        m = (fl & FIELD_QUEUE).astype(bool)
        self.qlen_pkts[s_last[m]] = hl["queue_pkts"][m]
        m = (fl & FIELD_LINE_RATE).astype(bool)
        self.line_rate_bps[s_last[m]] = hl["line_rate_mbps"][m].astype(np.uint64) * 1_000_000
        m = (fl & FIELD_HOP_LATENCY).astype(bool)
        self.hop_latency_ns[s_last[m]] = hl["hop_latency_us"][m].astype(np.uint64) * 1000
        m = (fl & FIELD_EGRESS_TS).astype(bool)
        self.egress_ts_us[s_last[m]] = hl["egress_ts_us"][m]
        m = has_tx[last]
        self.tx_bytes[s_last[m]] = hl["tx_bytes"][m]
        self.has_tx[s_last[m]] |= True
        # newest valid rate per group
        valid = ~np.isnan(rate)
        if valid.any():
            vi = np.flatnonzero(valid)
            gi = group[vi]
            newest = np.append(gi[1:] != gi[:-1], True)
            self.tx_rate_bps[slots_u[gi[newest]]] = rate[vi[newest]]
        # rings: only the newest ``depth`` records of a hop survive the batch, so only
        # those are written (a busy hop has thousands per round)
        sizes = np.diff(np.append(starts, n))
        rank = np.arange(n) - starts[group]
        w = _newest(rank, sizes, group, self.depth)
        ws = slot_sorted[w]
        pos = ((self.write_pos[ws] + rank[w].astype(np.uint64)) % np.uint64(self.depth)).astype(np.int64)
        hw = take(hops, order[w])
        self.ring_ts_us[ws, pos] = ts_o[w]
        self.ring_qlen_bytes[ws, pos] = hw["queue_bytes"]
        self.ring_qlen_pkts[ws, pos] = hw["queue_pkts"]
        self.ring_tx_rate_bps[ws, pos] = rate[w]
        self.ring_hop_latency_ns[ws, pos] = hw["hop_latency_us"].astype(np.uint64) * 1000
        self.write_pos[slots_u] += sizes.astype(np.uint64)
        out = np.empty(n, np.int64)
        out[order] = slot_sorted
        return out

    def history(self, slot: int) -> dict[str, np.ndarray]:
        """The ring of one hop, oldest first (at most ``depth`` samples)."""
        n = int(min(self.write_pos[slot], self.depth))
        start = int(self.write_pos[slot]) - n
        idx = (np.arange(start, start + n) % self.depth).astype(np.int64)
        return {
            "egress_ts_us": self.ring_ts_us[slot, idx].copy(),
            "qlen_bytes": self.ring_qlen_bytes[slot, idx].copy(),
            "qlen_pkts": self.ring_qlen_pkts[slot, idx].copy(),
            "tx_rate_bps": self.ring_tx_rate_bps[slot, idx].copy(),
            "hop_latency_ns": self.ring_hop_latency_ns[slot, idx].copy(),
        }

    def snapshot(self) -> HopSnapshot:
        s = np.flatnonzero(self._slots.used)
        return HopSnapshot(
            slot=s,
            node_id=self.node_id[s],
            egress_port=self.egress_port[s],
            qlen_bytes=self.qlen_bytes[s],
            qlen_pkts=self.qlen_pkts[s],
            tx_bytes=self.tx_bytes[s],
            tx_rate_bps=self.tx_rate_bps[s],
            line_rate_bps=self.line_rate_bps[s],
            hop_latency_ns=self.hop_latency_ns[s],
            egress_ts_us=self.egress_ts_us[s],
            last_update_ns=self.last_update_ns[s],
            samples=self.samples[s],
        )


class FlowTable:
    """Per-flow path, counters and last update; bounded, with ageing."""

    def __init__(self, *, capacity: int = 16384, ttl_ns: int = 10_000_000_000,
                 depth: int = 32, native: bool | None = None) -> None:
        _check("FlowTable.capacity", capacity, 1, 1 << 24)
        _check("FlowTable.ttl_ns", ttl_ns, 1, 1 << 62)
        _check("FlowTable.depth", depth, 1, 1 << 16)
        self.capacity, self.ttl_ns, self.depth = capacity, ttl_ns, depth
        #: per-record work in tables.c (None: when it builds)
        self.native = native_tables.available() if native is None else native
        self._slots = SlotMap(capacity, 2)
        c = capacity
        self.src_ip = np.zeros(c, np.uint32)
        self.dst_ip = np.zeros(c, np.uint32)
        self.sport = np.zeros(c, np.uint16)
        self.dest_qp = np.zeros(c, np.uint32)
        self.hop_count = np.zeros(c, np.uint8)
        self.path_node = np.zeros((c, MAX_PATH_HOPS), np.uint32)
        self.path_port = np.zeros((c, MAX_PATH_HOPS), np.uint16)
        self.path_slot = np.full((c, MAX_PATH_HOPS), -1, np.int64)
        self.samples = np.zeros(c, np.uint64)
        self.last_psn = np.zeros(c, np.uint32)
        self.path_changes = np.zeros(c, np.uint32)
        self.first_update_ns = np.zeros(c, np.int64)
        self.last_update_ns = np.zeros(c, np.int64)
        self.expired = 0
        #: History rings, (capacity, depth), one entry per sample: arrival time, PSN,
        #: largest queue (bytes) on the sample's path, sum of its hop latencies.
        self.write_pos = np.zeros(c, np.uint64)
        self.ring_arrival_ns = np.zeros((c, depth), np.int64)
        self.ring_psn = np.zeros((c, depth), np.uint32)
        self.ring_max_qlen_bytes = np.zeros((c, depth), np.uint32)
        self.ring_path_latency_ns = np.zeros((c, depth), np.uint64)

    def __len__(self) -> int:
        return len(self._slots)

    def update(self, samples: np.ndarray, hops: np.ndarray, hop_slots: np.ndarray) -> np.ndarray:
        """Account REPORT_DTYPE samples with their hop records; returns sample slots."""
        n = len(samples)
        if n == 0:
            return np.zeros(0, np.int64)
        k1 = (samples["src_ip"].astype(np.uint64) << np.uint64(32)) | samples["dst_ip"]
        k2 = (samples["sport"].astype(np.uint64) << np.uint64(32)) | samples["dest_qp"]
        # group by (k1, k2) with one lexsort (several times faster than unique(axis=0))
        o = np.lexsort((k2, k1))
        a, b = k1[o], k2[o]
        head = np.concatenate(([True], (a[1:] != a[:-1]) | (b[1:] != b[:-1])))
        inv = np.empty(n, np.int64)
        inv[o] = np.cumsum(head) - 1
        first_idx = o[head]  # lexsort is stable: the first sample of each flow
        uniq = np.stack([a[head], b[head]], axis=1)
        slots_u, new = self._slots.lookup(uniq.T, self.last_update_ns)
        if new.any():
            s = slots_u[new]
            u = uniq[new]
            self.src_ip[s] = u[:, 0] >> np.uint64(32)
            self.dst_ip[s] = u[:, 0] & np.uint64(0xFFFFFFFF)
            self.sport[s] = u[:, 1] >> np.uint64(32)
            self.dest_qp[s] = u[:, 1] & np.uint64(0xFFFFFFFF)
            self.samples[s] = 0
            self.path_changes[s] = 0
            self.hop_count[s] = 0
            self.path_node[s] = 0
            self.path_port[s] = 0
            self.path_slot[s] = -1
            self.first_update_ns[s] = samples["arrival_ns"][first_idx[new]]
            self.write_pos[s] = 0
        if (self.native and samples.dtype == REPORT_DTYPE and hops.dtype == HOP_DTYPE
                and len(uniq) <= self.capacity):
            return native_tables.flow_update(self, samples, hops, hop_slots, inv, slots_u, new)
        slot = slots_u[inv]
        self._record_history(samples, hops, slot, o, np.flatnonzero(head))
        # last sample of each flow in this batch
        last_idx = np.zeros(len(uniq), np.int64)
        last_idx[inv] = np.arange(n)  # later indices overwrite earlier ones
        s_last = slots_u
        self.samples[s_last] += np.bincount(inv, minlength=len(uniq)).astype(np.uint64)
        self.last_update_ns[s_last] = samples["arrival_ns"][last_idx]
        bth = samples["has_bth"][last_idx].astype(bool)
        self.last_psn[s_last[bth]] = samples["psn"][last_idx][bth]
        # path of the last sample with hop records of each flow (a host record of a run
        # the agent flushed from an idle flow has none: the path stays)
        with_hops = samples["hop_count"] > 0
        last_h = np.full(len(uniq), -1, np.int64)
        last_h[inv[with_hops]] = np.flatnonzero(with_hops)
        has_path = last_h >= 0
        is_last = np.zeros(n, bool)
        is_last[last_h[has_path]] = True
        hsel = is_last[hops["sample"]] & (hops["hop_index"] < MAX_PATH_HOPS)
        hp = take(hops, hsel)
        hslot = hop_slots[hsel]
        new_node = np.zeros((len(uniq), MAX_PATH_HOPS), np.uint32)
        new_port = np.zeros((len(uniq), MAX_PATH_HOPS), np.uint16)
        new_slot = np.full((len(uniq), MAX_PATH_HOPS), -1, np.int64)
        row = inv[hp["sample"]]
        col = hp["hop_index"].astype(np.int64)
        new_node[row, col] = hp["node_id"]
        new_port[row, col] = hp["egress_port"]
        new_slot[row, col] = hslot
        count = np.minimum(samples["hop_count"][np.maximum(last_h, 0)], MAX_PATH_HOPS)
        changed = (~new) & has_path & (
            (self.path_node[s_last] != new_node).any(axis=1)
            | (self.path_port[s_last] != new_port).any(axis=1)
        )
        self.path_changes[s_last[changed]] += 1
        sp = s_last[has_path]
        self.path_node[sp] = new_node[has_path]
        self.path_port[sp] = new_port[has_path]
        self.path_slot[sp] = new_slot[has_path]
        self.hop_count[sp] = count[has_path]
        return slot

    def _record_history(self, samples: np.ndarray, hops: np.ndarray, slot: np.ndarray,
                        order: np.ndarray, starts: np.ndarray) -> None:
        """Append each sample to its flow's ring; ``order`` groups the samples by flow
        (stable), ``starts`` are where the groups begin in it."""
        n = len(samples)
        hs = hops["sample"].astype(np.int64)
        max_q = np.zeros(n, np.uint32)
        if len(hops):
            q = hops["queue_bytes"]
            if (hs[1:] >= hs[:-1]).all():   # the decoders' order: a sample's hops together
                hop0 = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
                max_q[hs[hop0]] = np.maximum.reduceat(q, hop0)
            else:
                np.maximum.at(max_q, hs, q)
        lat = np.bincount(hs, weights=hops["hop_latency_us"].astype(np.float64), minlength=n)
        ss = slot[order]
        sizes = np.diff(np.append(starts, n))
        group = np.repeat(np.arange(len(sizes)), sizes)
        rank = np.arange(n) - starts[group]
        w = _newest(rank, sizes, group, self.depth)
        o, ws = order[w], ss[w]
        pos = ((self.write_pos[ws] + rank[w].astype(np.uint64)) % np.uint64(self.depth)).astype(np.int64)
        self.ring_arrival_ns[ws, pos] = samples["arrival_ns"][o]
        self.ring_psn[ws, pos] = samples["psn"][o]
        self.ring_max_qlen_bytes[ws, pos] = max_q[o]
        self.ring_path_latency_ns[ws, pos] = (lat[o] * 1000).astype(np.uint64)
        self.write_pos[ss[starts]] += sizes.astype(np.uint64)

    def history(self, slot: int) -> dict[str, np.ndarray]:
        """The ring of one flow, oldest first (at most ``depth`` samples)."""
        n = int(min(self.write_pos[slot], self.depth))
        start = int(self.write_pos[slot]) - n
        idx = (np.arange(start, start + n) % self.depth).astype(np.int64)
        return {
            "arrival_ns": self.ring_arrival_ns[slot, idx].copy(),
            "psn": self.ring_psn[slot, idx].copy(),
            "max_qlen_bytes": self.ring_max_qlen_bytes[slot, idx].copy(),
            "path_latency_ns": self.ring_path_latency_ns[slot, idx].copy(),
        }

    def expire(self, now_ns: int) -> int:
        """Drop flows idle for more than ttl_ns; returns how many aged out."""
        used = self._slots.used
        old = np.flatnonzero(used & (self.last_update_ns < now_ns - self.ttl_ns))
        self._slots.release(old)
        self.expired += len(old)
        return len(old)

    def snapshot(self) -> FlowSnapshot:
        s = np.flatnonzero(self._slots.used)
        return FlowSnapshot(
            slot=s,
            src_ip=self.src_ip[s],
            dst_ip=self.dst_ip[s],
            sport=self.sport[s],
            dest_qp=self.dest_qp[s],
            hop_count=self.hop_count[s],
            path_node=self.path_node[s],
            path_port=self.path_port[s],
            path_slot=self.path_slot[s],
            samples=self.samples[s],
            last_psn=self.last_psn[s],
            path_changes=self.path_changes[s],
            first_update_ns=self.first_update_ns[s],
            last_update_ns=self.last_update_ns[s],
        )
