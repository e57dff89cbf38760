"""Client side of the P4Runtime server tests: a controller built on the generated p4.v1
stubs (stream reader thread, per-RPC helpers, per-update errors) and P4Info ids by name."""
from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from google.protobuf import text_format
from google.rpc import status_pb2
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

HERE = Path(__file__).resolve().parent
PROGRAM = HERE / "p4" / "p4rt_test.p4"
DEVICE_ID = 1
Action = P.SetForwardingPipelineConfigRequest


def msg(cls: type, text: str):  # type: ignore[no-untyped-def]
    """A protobuf message of type `cls` from text format."""
    return text_format.Parse(text, cls())


class Ids:
    """P4Info ids by name, so tests read like the P4 program."""

    def __init__(self, info: P4I.P4Info) -> None:
        self.info = info

    def __getattr__(self, name: str) -> int:
        for kind in ("tables", "actions", "counters", "direct_counters", "meters", "direct_meters",
                     "registers", "digests", "controller_packet_metadata", "action_profiles"):
            for o in getattr(self.info, kind):
                if o.preamble.alias == name or o.preamble.name == name:
                    return o.preamble.id
        for v in self.info.value_sets:
            if v.preamble.alias == name or v.preamble.name == name:
                return v.preamble.id
        raise AttributeError(name)


@dataclass
class WriteError(Exception):
    code: grpc.StatusCode
    details: str
    errors: list[P.Error] = field(default_factory=list)


class Client:
    """One controller: a channel, a StreamChannel with its own reader, helpers per RPC."""

    def __init__(self, address: str, *, election_id: int | None = 1, device_id: int = DEVICE_ID,
                 channel: grpc.Channel | None = None) -> None:
        self.device_id = device_id
        self.channel = channel or grpc.insecure_channel(address)
        self.stub = PG.P4RuntimeStub(self.channel)
        self.election_id = election_id or 0
        self._out: queue.Queue[P.StreamMessageRequest | None] = queue.Queue()
        self.arbitrations: queue.Queue[P.MasterArbitrationUpdate] = queue.Queue()
        self.packets: queue.Queue[P.PacketIn] = queue.Queue()
        self.digests: queue.Queue[P.DigestList] = queue.Queue()
        self.errors: queue.Queue[P.StreamError] = queue.Queue()
        self.stream_status: grpc.RpcError | None = None
        self._stream_done = threading.Event()
        self._stream = None
        if election_id is not None:
            self.open_stream()
            self.arbitrate(election_id)

    # ----------------------------------------------------------- stream
    def open_stream(self) -> None:
        def requests() -> Iterator[P.StreamMessageRequest]:
            while True:
                m = self._out.get()
                if m is None:
                    return
                yield m

        self._stream = self.stub.StreamChannel(requests())

        def reader() -> None:
            try:
                for r in self._stream:
                    kind = r.WhichOneof("update")
                    {"arbitration": self.arbitrations, "packet": self.packets, "digest": self.digests,
                     "error": self.errors}[kind].put(getattr(r, kind))
            except grpc.RpcError as exc:
                self.stream_status = exc
            finally:
                self._stream_done.set()

        threading.Thread(target=reader, daemon=True).start()

    def send(self, m: P.StreamMessageRequest) -> None:
        self._out.put(m)

    def arbitrate(self, election_id: int, *, device_id: int | None = None, wait: bool = True
                  ) -> P.MasterArbitrationUpdate | None:
        self.election_id = election_id
        m = P.StreamMessageRequest()
        m.arbitration.device_id = self.device_id if device_id is None else device_id
        m.arbitration.election_id.high, m.arbitration.election_id.low = election_id >> 64, election_id & (2**64 - 1)
        self.send(m)
        return self.arbitrations.get(timeout=5) if wait else None

    def stream_ended(self, timeout: float = 5) -> bool:
        return self._stream_done.wait(timeout)

    def close(self) -> None:
        self._out.put(None)
        self.channel.close()

    # -------------------------------------------------------------- RPCs
    def _eid(self, req) -> None:  # type: ignore[no-untyped-def]
        req.election_id.high, req.election_id.low = self.election_id >> 64, self.election_id & (2**64 - 1)

    def set_pipeline(self, p4info: P4I.P4Info, config: bytes, action: int = Action.VERIFY_AND_COMMIT,
                     cookie: int = 0) -> None:
        req = P.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        self._eid(req)
        req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = config
        req.config.cookie.cookie = cookie
        self.stub.SetForwardingPipelineConfig(req)

    def write(self, *updates: P.Update | str, atomicity: int = 0) -> None:
        req = P.WriteRequest(device_id=self.device_id, atomicity=atomicity)
        self._eid(req)
        for u in updates:
            req.updates.append(msg(P.Update, u) if isinstance(u, str) else u)
        try:
            self.stub.Write(req)
        except grpc.RpcError as exc:
            errors = []
            for k, v in exc.trailing_metadata() or ():
                if k == "grpc-status-details-bin":
                    for d in status_pb2.Status.FromString(v).details:
                        e = P.Error()
                        d.Unpack(e)
                        errors.append(e)
            raise WriteError(exc.code(), exc.details(), errors) from None

    def read(self, *entities: P.Entity | str) -> list[P.Entity]:
        req = P.ReadRequest(device_id=self.device_id)
        for e in entities:
            req.entities.append(msg(P.Entity, e) if isinstance(e, str) else e)
        out: list[P.Entity] = []
        for resp in self.stub.Read(req):
            out.extend(resp.entities)
        return out


def write_error(client: Client, *updates: str) -> WriteError:
    """The WriteError of a batch expected to fail."""
    with pytest.raises(WriteError) as ei:
        client.write(*updates)
    return ei.value


def update_codes(err: WriteError) -> list[str]:
    return [grpc.StatusCode.OK.name if e.canonical_code == 0 else
            next(c.name for c in grpc.StatusCode if c.value[0] == e.canonical_code) for e in err.errors]


