"""Primary/backup arbitration among the StreamChannel clients of one device.

Rules (P4Runtime spec, mastership): each client states a 128-bit election id; two
live clients may not use the same one. The server remembers the highest election
id it has seen; the client holding it is the primary and the only one allowed to
write, set the pipeline or send packets. Every arbitration answer carries that
highest id and a status: OK for the primary, ALREADY_EXISTS for a backup while a
primary is connected, NOT_FOUND for a backup when there is none (the primary left;
a client becomes primary again by claiming an election id at least that high).
When the primary changes, every client is told.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from google.rpc import code_pb2, status_pb2
from p4.v1 import p4runtime_pb2 as P

from softswitch.p4runtime.errors import P4RuntimeError, invalid, not_found, unimplemented


def election_value(eid: P.Uint128) -> int:
    return (eid.high << 64) | eid.low


@dataclass(slots=True, eq=False, kw_only=True)
class StreamClient:
    """One StreamChannel; `send` must not block (it queues the message)."""

    send: Callable[[P.StreamMessageResponse], None]
    election_id: int | None = None
    name: str = field(default="client")


class Arbitrator:
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self._mu = threading.Lock()
        self._clients: list[StreamClient] = []
        self.highest: int | None = None

    def _primary_locked(self) -> StreamClient | None:
        if self.highest is None:
            return None
        for c in self._clients:
            if c.election_id == self.highest:
                return c
        return None

    def primary(self) -> StreamClient | None:
        with self._mu:
            return self._primary_locked()

    def _answer(self, c: StreamClient, primary: StreamClient | None) -> P.StreamMessageResponse:
        msg = P.StreamMessageResponse()
        arb = msg.arbitration
        arb.device_id = self.device_id
        if self.highest is not None:
            arb.election_id.high, arb.election_id.low = self.highest >> 64, self.highest & ((1 << 64) - 1)
        if c is primary:
            arb.status.CopyFrom(status_pb2.Status(code=code_pb2.OK, message="is primary"))
        elif primary is not None:
            arb.status.CopyFrom(status_pb2.Status(code=code_pb2.ALREADY_EXISTS,
                                                  message="is backup; a primary is connected"))
        else:
            arb.status.CopyFrom(status_pb2.Status(code=code_pb2.NOT_FOUND,
                                                  message="is backup; there is no primary"))
        return msg

    def arbitrate(self, client: StreamClient, update: P.MasterArbitrationUpdate) -> None:
        """Handle an arbitration message of `client`; raises to end its stream on bad input."""
        if update.device_id != self.device_id:
            raise not_found(f"arbitration: device id {update.device_id} is not this device "
                            f"({self.device_id})")
        if update.HasField("role") and (update.role.name or update.role.id):
            raise unimplemented(f"arbitration: roles are not supported (got role "
                                f"{update.role.name or update.role.id!r}); use the default role")
        eid = election_value(update.election_id)
        with self._mu:
            for c in self._clients:
                if c is not client and c.election_id == eid:
                    raise invalid(f"arbitration: election id {eid} is already used by another client")
            before = self._primary_locked()
            if client not in self._clients:
                self._clients.append(client)
            client.election_id = eid
            if self.highest is None or eid > self.highest:
                self.highest = eid
            after = self._primary_locked()
            targets = list(self._clients) if after is not before else [client]
            answers = [(c, self._answer(c, after)) for c in targets]
        for c, msg in answers:
            c.send(msg)

    def remove(self, client: StreamClient) -> None:
        with self._mu:
            if client not in self._clients:
                return
            before = self._primary_locked()
            self._clients.remove(client)
            after = self._primary_locked()
            answers = ([(c, self._answer(c, after)) for c in self._clients] if before is not after else [])
        for c, msg in answers:
            c.send(msg)

    def check_writer(self, eid: P.Uint128, what: str) -> None:
        """PERMISSION_DENIED unless `eid` is the primary's election id."""
        value = election_value(eid)
        with self._mu:
            p = self._primary_locked()
        if p is None:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"{what}: refused: no primary client (open a StreamChannel and "
                                 f"arbitrate first)")
        if p.election_id != value:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"{what}: refused: election id {value} is not the primary's ({p.election_id})")
