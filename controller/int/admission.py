"""What the collector lets in: Telemetry Reports from the configured switches only,
host-agent batches only as valid ``formats.auth`` frames.

Checked before decoding so forged telemetry never reaches the tables, the report
sequence accounting (gaps stay counted per genuine switch) or the rate engines.
Every refusal is counted by reason (``Collector.stats().rejected``) and logged at
most once per reason every ten seconds:

- ``report_source``: a Telemetry Report from an address/port that is no switch's
  report source;
- ``agent_<reason>``: a batch frame refused by ``common.auth.Verifier`` (bad MAC,
  unknown sender or key, replay, ...);
- ``agent_sender_mismatch``: a valid frame whose inner batch names another agent
  (one agent speaking for another).
"""
from __future__ import annotations

import logging
import socket
import struct
from collections.abc import Sequence

import numpy as np

from common.auth import KeyFile, RejectLog, Verifier
from formats.auth import AUTH_HEADER_LEN, AUTH_OVERHEAD, FrameKind

__all__ = ["Admission"]

log = logging.getLogger("controller.int")
_AGENT_ID = struct.Struct("!I")   # formats.agent_batch: agent_id at offset 12


class Admission:
    """Source and frame checks of the collector (runs under its lock)."""

    def __init__(self, *, keys: KeyFile | None,
                 report_sources: frozenset[tuple[str, int]] | None) -> None:
        self.report_sources = report_sources
        self.verifier = (Verifier(keys, kinds=(FrameKind.HOST_BATCH,),
                                  log=RejectLog(log, "collector: agent batch"))
                         if keys is not None else None)
        self._log = RejectLog(log, "collector")
        self._counts: dict[str, int] = {}
        #: report sources as (IPv4 << 16 | port) keys, to check many datagrams at once
        self._source_keys = (None if report_sources is None else np.array(
            sorted(struct.unpack("!I", socket.inet_aton(a))[0] << 16 | p
                   for a, p in report_sources), np.uint64))

    def _reject(self, reason: str, detail: str) -> None:
        self._counts[reason] = self._counts.get(reason, 0) + 1
        self._log(reason, detail)

    def reports(self, data: Sequence[tuple[bytes, tuple[str, int]]]) -> list[bytes]:
        """Payloads of the datagrams that came from a configured report source."""
        allowed = self.report_sources
        if allowed is None:
            return [d for d, _ in data]
        out = []
        for d, addr in data:
            if (addr[0], addr[1]) in allowed:
                out.append(d)
            else:
                self._reject("report_source", f"Telemetry Report from {addr[0]}:{addr[1]}")
        return out

    def agent_batches(self, datagrams: Sequence[bytes]) -> list[bytes]:
        """Inner batches of the frames that check out (``verifier`` must be set)."""
        v = self.verifier
        assert v is not None
        out = []
        for d in datagrams:
            opened = v.open(d)
            if opened is None:
                continue
            inner = opened.payload
            if len(inner) >= 16 and _AGENT_ID.unpack_from(inner, 12)[0] != opened.sender_id:
                self._reject("agent_sender_mismatch",
                             f"sender {opened.sender_id} sent a batch of agent "
                             f"{_AGENT_ID.unpack_from(inner, 12)[0]}")
                continue
            out.append(inner)
        return out

    def report_rows(self, lens: np.ndarray, src_ip: np.ndarray,
                    src_port: np.ndarray) -> np.ndarray:
        """``report``'s check on a receive pool: ``lens`` with the datagrams from no
        configured source set to 0 (counted under ``report_source``)."""
        if self._source_keys is None:
            return lens
        key = (src_ip.astype(np.uint64) << np.uint64(16)) | src_port
        bad = (lens > 0) & ~np.isin(key, self._source_keys)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            self._counts["report_source"] = self._counts.get("report_source", 0) + int(bad.sum())
            self._log("report_source", f"Telemetry Report from "
                      f"{socket.inet_ntoa(struct.pack('!I', int(src_ip[i])))}:{int(src_port[i])}")
            lens = np.where(bad, 0, lens)
        return lens

    def agent_rows(self, buf: np.ndarray, lens: np.ndarray) -> np.ndarray:
        """``agent_batches`` on a receive pool: the inner batch length of every row
        whose frame checks out (it starts at ``AUTH_HEADER_LEN``), 0 for the others.
        Header checks run on all frames at once, then one HMAC per frame."""
        v = self.verifier
        assert v is not None
        ok, sender = v.open_rows(buf, lens)
        inner = np.where(ok, lens.astype(np.int64) - AUTH_OVERHEAD, 0)
        agent = np.ascontiguousarray(
            buf[:, AUTH_HEADER_LEN + 12:AUTH_HEADER_LEN + 16]).view(">u4")[:, 0]
        mismatch = ok & (inner >= 16) & (agent != sender)
        if mismatch.any():
            i = int(np.flatnonzero(mismatch)[0])
            self._counts["agent_sender_mismatch"] = (
                self._counts.get("agent_sender_mismatch", 0) + int(mismatch.sum()))
            self._log("agent_sender_mismatch", f"sender {int(sender[i])} sent a batch of "
                      f"agent {int(agent[i])}")
            inner[mismatch] = 0
        return inner

    def rejected(self) -> dict[str, int]:
        out = dict(self._counts)
        if self.verifier is not None:
            for k, n in self.verifier.stats.rejected.items():
                out["agent_" + k] = n
        return out
