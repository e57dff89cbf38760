"""Vectorised decoding of host-agent batches (formats.agent_batch) into REPORT/HOP arrays.

The records of every valid datagram of a receive round are joined into one
buffer and viewed as ``HOST_RECORD_DTYPE``; hop records are selected with a
boolean (record x stack position) mask, so there is no Python work per record.
Lost batches are counted per agent from ``batch_seq``; records the agent itself
dropped are taken from its ``dropped`` counter.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from controller.int.errors import Malformed
from controller.int.records import (
    HOP_DTYPE,
    REPORT_DTYPE,
    SOURCE_HOST,
    DecodedBatch,
    take,
)
from formats.agent_batch import (
    AGENT_BATCH_HEADER_LEN,
    AGENT_BATCH_MAGIC,
    AGENT_BATCH_VERSION,
)
from formats.int_fields import HOP_FIELDS
from formats.int_md import (
    HOP_RECORD_DTYPE,
    HOST_RECORD_DTYPE,
    INT_DS_ID_HPCC,
    MAX_HOPS,
    ROCEV2_UDP_PORT,
)

_HEAD = np.dtype(
    [("magic", ">u4"), ("version", "u1"), ("flags", "u1"), ("record_size", ">u2"),
     ("count", ">u4"), ("agent_id", ">u4"), ("batch_seq", ">u4"), ("dropped", ">u4")]
)

@dataclass(slots=True, kw_only=True)
class AgentState:
    """Counters of one agent."""

    agent_id: int
    batches: int = 0
    records: int = 0
    lost_batches: int = 0
    agent_dropped: int = 0
    last_seq: int = -1


@dataclass(slots=True, kw_only=True)
class HostDecodeStats:
    datagrams: int = 0
    records: int = 0
    hop_records: int = 0
    malformed: Counter = field(default_factory=Counter)
    agents: dict[int, AgentState] = field(default_factory=dict)


def fields_from_bitmaps(ins: np.ndarray, ds_id: np.ndarray, ds_ins: np.ndarray) -> np.ndarray:
    """FIELD_* presence masks from instruction bitmaps (DS fields only for our domain)."""
    ins = np.asarray(ins, np.uint16)
    ds = np.where(np.asarray(ds_id) == INT_DS_ID_HPCC, ds_ins, 0).astype(np.uint16)
    out = np.zeros(len(ins), np.uint16)
    for f in HOP_FIELDS:
        out |= ((ds if f.ds else ins) & np.uint16(f.mask)).astype(bool) * np.uint16(f.flag)
    return out


def _hop_rows(rec: np.ndarray) -> np.ndarray:
    """Every hop slot of ``rec`` as a raw row (``n * MAX_HOPS`` of them, record-major):
    selecting raw rows is many times faster than selecting structured elements."""
    off = HOST_RECORD_DTYPE.fields["hops"][1]  # type: ignore[index]
    raw = np.ascontiguousarray(rec).view(np.uint8).reshape(len(rec), HOST_RECORD_DTYPE.itemsize)
    size = HOP_RECORD_DTYPE.itemsize
    hops = raw[:, off:off + MAX_HOPS * size].reshape(len(rec) * MAX_HOPS, size)
    return np.ascontiguousarray(hops).view(np.dtype((np.void, size))).reshape(-1)


class HostBatchDecoder:
    """Decodes agent batch datagrams; counts malformed ones and lost batches per agent."""

    def __init__(self) -> None:
        self.stats = HostDecodeStats()

    def decode(self, datagrams: Sequence[bytes], arrival_ns: int) -> DecodedBatch:
        st = self.stats
        st.datagrams += len(datagrams)
        size = HOST_RECORD_DTYPE.itemsize
        bodies: list[bytes] = []
        agent_of: list[int] = []
        seq_of: list[int] = []
        for d in datagrams:
            if len(d) < AGENT_BATCH_HEADER_LEN:
                st.malformed[Malformed.SHORT] += 1
                continue
            h = np.frombuffer(d, _HEAD, count=1)[0]
            if int(h["magic"]) != AGENT_BATCH_MAGIC:
                st.malformed[Malformed.BATCH_MAGIC] += 1
            elif int(h["version"]) != AGENT_BATCH_VERSION:
                st.malformed[Malformed.BATCH_VERSION] += 1
            elif int(h["record_size"]) != size:
                st.malformed[Malformed.BATCH_RECORD_SIZE] += 1
            elif len(d) != AGENT_BATCH_HEADER_LEN + int(h["count"]) * size:
                st.malformed[Malformed.BATCH_LENGTH] += 1
            else:
                agent = int(h["agent_id"])
                seq = int(h["batch_seq"])
                self._account(agent, seq, int(h["dropped"]), int(h["count"]))
                if int(h["count"]):
                    bodies.append(d[AGENT_BATCH_HEADER_LEN:])
                    agent_of.append(agent)
                    seq_of.append(seq)
        if not bodies:
            return DecodedBatch.empty()
        counts = [len(b) // size for b in bodies]
        rec = np.frombuffer(b"".join(bodies), HOST_RECORD_DTYPE)
        out = self.decode_records(
            rec,
            arrival_ns=arrival_ns,
            agent_id=np.repeat(np.asarray(agent_of, np.uint32), counts),
            batch_seq=np.repeat(np.asarray(seq_of, np.uint32), counts),
        )
        st.records += len(out.samples)
        st.hop_records += len(out.hops)
        return out

    def decode_pool(self, buf: np.ndarray, lens: np.ndarray, arrival_ns: int,
                    offset: int = 0) -> DecodedBatch:
        """Decode the batches of a receive pool in place (``rxbatch.RxPool``): row i of
        ``buf`` holds a batch of ``lens[i]`` bytes (0: none) starting ``offset`` bytes
        into the row (behind an authenticated frame's header).

        Same result and counters as ``decode``; headers are checked with numpy, the
        only Python work per datagram is its agent's sequence accounting."""
        st = self.stats
        size = HOST_RECORD_DTYPE.itemsize
        lens = lens.astype(np.int64)
        live = lens > 0
        st.datagrams += int(live.sum())
        if not live.any():
            return DecodedBatch.empty()
        hl = AGENT_BATCH_HEADER_LEN
        h = np.ascontiguousarray(buf[:, offset:offset + hl]).view(_HEAD)[:, 0]
        count = h["count"].astype(np.int64)
        checks = (
            (Malformed.SHORT, lens < hl),
            (Malformed.BATCH_MAGIC, h["magic"] != AGENT_BATCH_MAGIC),
            (Malformed.BATCH_VERSION, h["version"] != AGENT_BATCH_VERSION),
            (Malformed.BATCH_RECORD_SIZE, h["record_size"] != size),
            (Malformed.BATCH_LENGTH, lens != hl + count * size),
        )
        ok = live.copy()
        for reason, fails in checks:
            k = ok & fails
            if k.any():
                st.malformed[reason] += int(k.sum())
                ok &= ~k
        rows = np.flatnonzero(ok)
        agents, seqs, drops = (h["agent_id"][rows].tolist(), h["batch_seq"][rows].tolist(),
                               h["dropped"][rows].tolist())
        counts = count[rows].tolist()
        for agent, seq, dropped, c in zip(agents, seqs, drops, counts):
            self._account(agent, seq, dropped, c)
        keep = [i for i, c in zip(rows.tolist(), counts) if c]
        if not keep:
            return DecodedBatch.empty()
        cnt = count[keep]
        start = offset + hl
        rec = np.frombuffer(b"".join([buf[i, start:start + c * size].data
                                      for i, c in zip(keep, cnt.tolist())]), HOST_RECORD_DTYPE)
        out = self.decode_records(
            rec, arrival_ns=arrival_ns,
            agent_id=np.repeat(h["agent_id"][keep].astype(np.uint32), cnt),
            batch_seq=np.repeat(h["batch_seq"][keep].astype(np.uint32), cnt))
        st.records += len(out.samples)
        st.hop_records += len(out.hops)
        return out

    def _account(self, agent: int, seq: int, dropped: int, count: int) -> None:
        """Batch sequence and counters of one accepted datagram of ``agent``."""
        st = self.stats
        a = st.agents.get(agent)
        if a is None:
            a = st.agents[agent] = AgentState(agent_id=agent)
        elif a.last_seq >= 0:
            gap = (seq - a.last_seq) & 0xFFFFFFFF
            if 1 < gap < 1 << 31:
                a.lost_batches += gap - 1
        if a.last_seq < 0 or 0 < ((seq - a.last_seq) & 0xFFFFFFFF) < 1 << 31:
            a.last_seq = seq
        a.batches += 1
        a.records += count
        a.agent_dropped = dropped

    def decode_records(
        self,
        rec: np.ndarray,
        *,
        arrival_ns: int,
        agent_id: np.ndarray | int = 0,
        batch_seq: np.ndarray | int = 0,
    ) -> DecodedBatch:
        """REPORT/HOP arrays from HOST_RECORD_DTYPE records (no Python loop per record)."""
        n = len(rec)
        hop_count = rec["hop_count"].astype(np.int64)
        bad = hop_count > MAX_HOPS
        if bad.any():
            self.stats.malformed[Malformed.RECORD_HOP_COUNT] += int(bad.sum())
            rec = take(rec, ~bad)
            hop_count = hop_count[~bad]
            if not np.isscalar(agent_id):
                agent_id = np.asarray(agent_id)[~bad]
            if not np.isscalar(batch_seq):
                batch_seq = np.asarray(batch_seq)[~bad]
            n = len(rec)
        s = np.zeros(n, REPORT_DTYPE)
        s["arrival_ns"] = arrival_ns
        s["source"] = SOURCE_HOST
        s["reporter"] = agent_id
        s["seq"] = batch_seq
        s["src_ip"] = rec["src_ip"]
        s["dst_ip"] = rec["dst_ip"]
        s["sport"] = rec["src_port"]
        s["dport"] = rec["orig_dport"]
        s["dest_qp"] = rec["dest_qp"]
        s["psn"] = rec["sample_psn"]
        s["run_psn"] = rec["psn"]
        s["psn_count"] = rec["psn_count"]
        s["run_first_ns"] = rec["run_first_ns"]
        s["run_last_ns"] = rec["run_last_ns"]
        s["opcode"] = rec["opcode"]
        s["has_bth"] = rec["orig_dport"] == ROCEV2_UDP_PORT
        s["hop_count"] = hop_count
        s["e_bit"] = (rec["md_flags"] >> 1) & 1
        s["ins_bitmap"] = rec["instruction_bitmap"]
        s["ds_bitmap"] = rec["ds_instruction"]
        s["capture_ns"] = rec["capture_ns"]
        mask = np.arange(MAX_HOPS)[None, :] < hop_count[:, None]
        # record-major, newest hop first within a record
        src = _hop_rows(rec)[mask.reshape(-1)].view(HOP_RECORD_DTYPE)
        sample = np.repeat(np.arange(n, dtype=np.uint32), hop_count)
        stack_pos = np.nonzero(mask)[1]
        h = np.zeros(len(src), HOP_DTYPE)
        h["sample"] = sample
        h["hop_index"] = hop_count[sample] - 1 - stack_pos
        h["fields"] = fields_from_bitmaps(
            rec["instruction_bitmap"], rec["ds_id"], rec["ds_instruction"]
        )[sample]
        for f in HOP_FIELDS:
            for p in f.parts:
                h[p.col] = src[p.name]
        return DecodedBatch(samples=s, hops=h)


__all__ = ["AgentState", "HostBatchDecoder", "HostDecodeStats", "fields_from_bitmaps"]
