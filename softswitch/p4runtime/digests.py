"""Digest delivery: DigestEntry configuration, batching into DigestLists, acks.

Why a small engine with its own thread: the data plane hands over digests as they
come; P4Runtime wants them batched (up to max_list_size per list, at most
max_timeout_ns late) and not repeated while a list with the same data waits for
its DigestListAck (up to ack_timeout_ns). The data path only appends under a short
lock; building and sending lists happens on the engine's thread.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from p4.v1 import p4data_pb2
from p4.v1 import p4runtime_pb2 as P

from softswitch.p4runtime.codec import bitwidth_of, encode_p4data
from softswitch.p4runtime.schema import DigestInfo

MAX_PENDING = 65536
MAX_UNACKED_LISTS = 1024


@dataclass(slots=True, kw_only=True)
class _DigestState:
    info: DigestInfo
    config: P.DigestEntry.Config
    pending: list[tuple[Any, ...]] = field(default_factory=list)
    first_ns: int = 0
    next_list_id: int = 1
    unacked: dict[int, tuple[int, set[tuple[Any, ...]]]] = field(default_factory=dict)
    dropped: int = 0


class DigestEngine:
    """Batches digests of configured digest ids and sends them through `send`."""

    def __init__(self, send: Callable[[P.StreamMessageResponse], bool]) -> None:
        self._send = send
        self._mu = threading.Condition()
        self._states: dict[int, _DigestState] = {}
        self._by_name: dict[str, int] = {}
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="p4rt-digests", daemon=True)
        self._thread.start()

    def close(self) -> None:
        with self._mu:
            self._stop = True
            self._mu.notify_all()
        self._thread.join(timeout=2)

    # ------------------------------------------------------------- config
    def reset(self) -> None:
        with self._mu:
            self._states.clear()
            self._by_name.clear()

    def configure(self, info: DigestInfo, config: P.DigestEntry.Config | None) -> None:
        with self._mu:
            if config is None:
                self._states.pop(info.id, None)
                self._by_name.pop(info.name, None)
                return
            st = self._states.get(info.id)
            if st is None:
                self._states[info.id] = _DigestState(info=info, config=config)
                self._by_name[info.name] = info.id
            else:
                st.config = config
            self._mu.notify_all()

    # ------------------------------------------------------------ traffic
    def push(self, name: str, values: list[tuple[Any, ...]]) -> None:
        """From the data path: digests of struct `name`; dropped unless configured."""
        now = time.monotonic_ns()
        with self._mu:
            did = self._by_name.get(name)
            if did is None:
                return
            st = self._states[did]
            live: set[tuple[Any, ...]] = set()
            for list_id, (sent_ns, data) in list(st.unacked.items()):
                if not st.config.ack_timeout_ns or now - sent_ns < st.config.ack_timeout_ns:
                    live |= data
                else:
                    del st.unacked[list_id]  # timed out: its data may be sent again
            for v in values:
                if v in live or v in st.pending:
                    continue
                if len(st.pending) >= MAX_PENDING:
                    st.dropped += 1
                    continue
                if not st.pending:
                    st.first_ns = now
                st.pending.append(v)
            self._mu.notify_all()

    def ack(self, digest_id: int, list_id: int) -> None:
        with self._mu:
            st = self._states.get(digest_id)
            if st is not None:
                st.unacked.pop(list_id, None)

    # ------------------------------------------------------------- thread
    def _due(self, now: int) -> tuple[list[P.StreamMessageResponse], float]:
        out = []
        wait_s = 1.0
        for st in self._states.values():
            if not st.pending:
                continue
            limit = st.config.max_list_size if st.config.max_list_size > 0 else len(st.pending)
            age = now - st.first_ns
            if len(st.pending) >= limit or age >= st.config.max_timeout_ns:
                while st.pending:
                    batch, st.pending = st.pending[:limit], st.pending[limit:]
                    out.append(self._make_list(st, batch, now))
                    if len(st.pending) < limit and age < st.config.max_timeout_ns:
                        break
                st.first_ns = now
            else:
                wait_s = min(wait_s, (st.config.max_timeout_ns - age) / 1e9)
        return out, max(wait_s, 0.0005)

    def _make_list(self, st: _DigestState, batch: list[tuple[Any, ...]], now: int) -> P.StreamMessageResponse:
        msg = P.StreamMessageResponse()
        dl = msg.digest
        dl.digest_id, dl.list_id, dl.timestamp = st.info.id, st.next_list_id, time.time_ns()
        st.next_list_id += 1
        members = st.info.members
        symbols = st.info.symbols or (None,) * len(members)
        widths = [bitwidth_of(spec) if sym is None else (0, False) for (_, spec), sym in zip(members, symbols)]
        for values in batch:
            d = dl.data.add()
            if widths and len(widths) == len(values):
                for v, (w, signed), sym in zip(values, widths, symbols):
                    d.struct.members.append(_encode_member(v, w, signed, sym))
            else:
                for v in values:
                    d.struct.members.append(encode_p4data(v))
        st.unacked[dl.list_id] = (now, set(batch))
        while len(st.unacked) > MAX_UNACKED_LISTS:  # a controller that never acks
            del st.unacked[next(iter(st.unacked))]
        return msg

    def _run(self) -> None:
        while True:
            with self._mu:
                if self._stop:
                    return
                msgs, wait_s = self._due(time.monotonic_ns())
                if not msgs:
                    self._mu.wait(timeout=wait_s)
                    continue
            for m in msgs:
                self._send(m)


def _encode_member(value: Any, width: int, signed: bool,
                   symbol: tuple[str, tuple[str, ...]] | int | None) -> Any:
    """One digest member: a bit string, or for an error or enum its name, for a
    serializable enum its value bytes (P4Runtime's P4Data forms for those types)."""
    if symbol is None:
        return encode_p4data(value, width, signed)
    d = p4data_pb2.P4Data()
    v = int(value)
    if isinstance(symbol, int):
        d.enum_value = (v & ((1 << symbol) - 1)).to_bytes((symbol + 7) // 8, "big")
    elif 0 <= v < len(symbol[1]):
        if symbol[0] == "error":
            d.error = symbol[1][v]
        else:
            d.enum = symbol[1][v]
    else:
        d.bitstring = v.to_bytes(max(1, (v.bit_length() + 7) // 8), "big")
    return d
