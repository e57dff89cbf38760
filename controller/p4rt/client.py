"""One switch, one gRPC channel, one StreamChannel: the P4Runtime client.

Why a class with a thread: the StreamChannel carries arbitration, packet-in and
digests asynchronously and must stay open for this client to remain primary.  A
reader thread owns it; when it breaks, the thread reconnects with exponential
backoff and calls `on_reconnect`, so the layer above can restore the switch's state.

Every gRPC failure is wrapped here, once, into a `controller.p4rt.errors` class.
The client holds no lock on the switch beyond the P4Runtime arbitration itself, so
p4runtime-shell (or another controller) may connect alongside with its own election id.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Self

import grpc
from google.rpc import code_pb2, status_pb2
from p4.config.v1 import p4info_pb2 as P4I
from p4.v1 import p4runtime_pb2 as P
from p4.v1 import p4runtime_pb2_grpc as PG

from .errors import (
    ArbitrationError,
    ConnectError,
    PipelineError,
    RpcError,
    UpdateFailure,
    WriteError,
)

LOG = logging.getLogger("controller.p4rt")

_CODE_NAMES = {v: k for k, v in code_pb2.Code.items()}
_STREAM_END = object()


def _uint128(value: int) -> P.Uint128:
    return P.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


@dataclass(slots=True, frozen=True, kw_only=True)
class Backoff:
    """Reconnect delays: first, doubling, capped."""

    first_s: float = 0.1
    max_s: float = 5.0

    def delays(self) -> Iterator[float]:
        d = self.first_s
        while True:
            yield d
            d = min(self.max_s, d * 2)


@dataclass(slots=True, frozen=True, kw_only=True)
class TlsOptions:
    """TLS to the switch: the CA that signed its certificate, optionally our own
    certificate and key (switches that require client certificates), and the name
    to check in the switch's certificate when the address is an IP."""

    ca_pem: bytes
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    server_name: str = ""

    @classmethod
    def from_files(cls, ca: str, cert: str | None = None, key: str | None = None,
                   server_name: str = "") -> TlsOptions:
        def read(path: str | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                with open(path, "rb") as fh:
                    return fh.read()
            except OSError as exc:
                raise ConnectError(f"TLS {what} {path}: cannot read: {exc.strerror}") from None
        if (cert is None) != (key is None):
            raise ConnectError("TLS: give both the client certificate and its key, or neither")
        ca_pem = read(ca, "CA")
        assert ca_pem is not None
        return cls(ca_pem=ca_pem, cert_pem=read(cert, "certificate"), key_pem=read(key, "key"),
                   server_name=server_name)


@dataclass(slots=True, kw_only=True)
class Digest:
    """One digest list as received (data still P4Data protobufs)."""

    digest_id: int
    list_id: int
    data: list[object]
    timestamp_ns: int


@dataclass(slots=True, kw_only=True)
class StreamStats:
    connects: int = 0
    disconnects: int = 0
    packet_ins: int = 0
    digests: int = 0
    stream_errors: list[str] = field(default_factory=list)


class SwitchClient:
    """P4Runtime client of one device (`name` is only used in messages)."""

    def __init__(self, *, name: str, address: str, device_id: int, election_id: int = 1,
                 timeout_s: float = 5.0, backoff: Backoff | None = None,
                 on_reconnect: Callable[[SwitchClient], None] | None = None,
                 queue_size: int = 4096, tls: TlsOptions | None = None) -> None:
        self.name = name
        self.address = address
        self.device_id = device_id
        self.election_id = election_id
        self.timeout_s = timeout_s
        self.backoff = backoff or Backoff()
        self.on_reconnect = on_reconnect
        self.tls = tls
        self.packet_ins: queue.Queue[P.PacketIn] = queue.Queue(maxsize=queue_size)
        self.digests: queue.Queue[Digest] = queue.Queue(maxsize=queue_size)
        self.stats = StreamStats()
        self._channel: grpc.Channel | None = None
        self._stub: PG.P4RuntimeStub | None = None
        self._requests: queue.Queue[object] | None = None
        self._arb = threading.Condition()
        self._arb_status: int | None = None      # google.rpc code of the last arbitration answer
        self._arb_primary_id: int = 0
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    # ---------------------------------------------------------------- connection
    @property
    def is_primary(self) -> bool:
        with self._arb:
            return self._arb_status == code_pb2.OK

    @property
    def connected(self) -> bool:
        with self._arb:
            return self._arb_status is not None and self._arb_status >= 0

    @property
    def role_state(self) -> str:
        """'primary', 'backup' (another client is primary), 'no-primary' (the primary
        left; nobody may write until a client claims the highest election id) or
        'disconnected'."""
        with self._arb:
            st = self._arb_status
        if st is None or st < 0:
            return "disconnected"
        if st == code_pb2.OK:
            return "primary"
        return "no-primary" if st == code_pb2.NOT_FOUND else "backup"

    def reclaim_primary(self) -> bool:
        """When the primary has left (`role_state == 'no-primary'`), become primary
        again by claiming the highest election id the switch has seen (P4Runtime: a
        client becomes primary with an id at least that high).  Never takes over from a
        live primary.  True when this client is primary afterwards."""
        if self.role_state != "no-primary":
            return self.is_primary
        with self._arb:
            self.election_id = max(self.election_id, self._arb_primary_id)
            self._arb_status = None
        self._send(self._arbitration_request())
        with self._arb:
            self._arb.wait_for(lambda: self._arb_status is not None, timeout=self.timeout_s)
        return self.is_primary

    def connect(self, timeout_s: float | None = None) -> None:
        """Open the channel and the stream, and become primary; raises ConnectError /
        ArbitrationError.  Afterwards a background thread keeps the stream up."""
        self._closed.clear()
        try:
            self._open(self.timeout_s if timeout_s is None else timeout_s)
            self._thread = threading.Thread(target=self._run, name=f"p4rt-{self.name}", daemon=True)
            self._thread.start()
            self._check_primary()
        except BaseException:
            self.close()
            raise

    def _open(self, timeout_s: float) -> None:
        self._drop_channel()
        options: list[tuple[str, object]] = [("grpc.max_receive_message_length", 256 << 20),
                                             ("grpc.max_send_message_length", 256 << 20)]
        if self.tls is None:
            channel = grpc.insecure_channel(self.address, options=options)
        else:
            creds = grpc.ssl_channel_credentials(self.tls.ca_pem, self.tls.key_pem, self.tls.cert_pem)
            if self.tls.server_name:
                options.append(("grpc.ssl_target_name_override", self.tls.server_name))
            channel = grpc.secure_channel(self.address, creds, options=options)
        try:
            grpc.channel_ready_future(channel).result(timeout=timeout_s)
        except grpc.FutureTimeoutError:
            channel.close()
            hint = " (TLS: check the CA, the client certificate and the server name)" if self.tls else ""
            if self.tls is None and _speaks_tls(self.address):
                hint = (": it answers with TLS, and no certificates were given; give "
                        "--grpc-ca, --grpc-cert and --grpc-key (or tls: for this switch in "
                        "the topology file)")
            raise ConnectError(f"switch {self.name}: unreachable at {self.address} "
                               f"(no gRPC connection within {timeout_s:g} s){hint}") from None
        self._channel = channel
        self._stub = PG.P4RuntimeStub(channel)
        requests: queue.Queue[object] = queue.Queue()
        with self._arb:
            self._arb_status = None
        self._requests = requests
        self._responses = self._stub.StreamChannel(self._request_iter(requests))
        requests.put(self._arbitration_request())
        self.stats.connects += 1

    def _arbitration_request(self) -> P.StreamMessageRequest:
        req = P.StreamMessageRequest()
        req.arbitration.device_id = self.device_id
        req.arbitration.election_id.CopyFrom(_uint128(self.election_id))
        return req

    @staticmethod
    def _request_iter(requests: queue.Queue[object]) -> Iterator[P.StreamMessageRequest]:
        while True:
            item = requests.get()
            if item is _STREAM_END:
                return
            yield item  # type: ignore[misc]

    def _check_primary(self) -> None:
        with self._arb:
            ok = self._arb.wait_for(lambda: self._arb_status is not None, timeout=self.timeout_s)
            status, primary = self._arb_status, self._arb_primary_id
        if not ok:
            raise ConnectError(f"switch {self.name} at {self.address}: no arbitration answer within "
                               f"{self.timeout_s:g} s (device id {self.device_id} right?)")
        if status == -1:
            raise ConnectError(f"switch {self.name} at {self.address}: stream refused: "
                               f"{self.stats.stream_errors[-1] if self.stats.stream_errors else 'unknown'}")
        if status == code_pb2.NOT_FOUND and self.reclaim_primary():
            return   # nobody was primary (the last one left): claimed with the highest id
        if status != code_pb2.OK:
            raise ArbitrationError(f"switch {self.name}: not primary with election id {self.election_id}; "
                                   f"the primary holds election id {primary}")

    def _run(self) -> None:
        """Reader thread: consume the stream; on a break, reconnect with backoff."""
        while not self._closed.is_set():
            try:
                for resp in self._responses:
                    self._dispatch(resp)
                err = "stream closed by the switch"
            except grpc.RpcError as exc:
                err = f"{exc.code().name}: {exc.details()}"  # type: ignore[attr-defined]
            except ValueError as exc:   # channel closed under us
                err = str(exc)
            if self._closed.is_set():
                return
            self.stats.disconnects += 1
            self.stats.stream_errors.append(err)
            with self._arb:
                self._arb_status = -1 if self._arb_status is None else None
                self._arb.notify_all()
            LOG.warning("switch %s: stream lost (%s); reconnecting", self.name, err)
            for delay in self.backoff.delays():
                if self._closed.wait(delay):
                    return
                try:
                    self._open(self.timeout_s)
                    if self._closed.is_set():   # closed while we were reconnecting
                        self._drop_channel()
                        return
                    break
                except ConnectError as exc:
                    LOG.debug("switch %s: %s", self.name, exc)
            else:  # pragma: no cover - delays() is endless
                return
            if self.on_reconnect is not None:
                threading.Thread(target=self._reconnected, daemon=True,
                                 name=f"p4rt-{self.name}-restore").start()

    def _reconnected(self) -> None:
        try:
            self._check_primary()
            if self.on_reconnect is not None:
                self.on_reconnect(self)
        except Exception as exc:  # noqa: BLE001 - reported, the next break retries
            LOG.error("switch %s: restore after reconnect failed: %s", self.name, exc)
            self.stats.stream_errors.append(f"restore failed: {exc}")

    def _dispatch(self, resp: P.StreamMessageResponse) -> None:
        kind = resp.WhichOneof("update")
        if kind == "arbitration":
            a = resp.arbitration
            with self._arb:
                self._arb_status = a.status.code
                self._arb_primary_id = (a.election_id.high << 64) | a.election_id.low
                self._arb.notify_all()
        elif kind == "packet":
            self.stats.packet_ins += 1
            try:
                self.packet_ins.put_nowait(resp.packet)
            except queue.Full:
                pass
        elif kind == "digest":
            d = resp.digest
            self.stats.digests += 1
            try:
                self.digests.put_nowait(Digest(digest_id=d.digest_id, list_id=d.list_id,
                                               data=list(d.data), timestamp_ns=d.timestamp))
            except queue.Full:
                pass
            ack = P.StreamMessageRequest()
            ack.digest_ack.digest_id = d.digest_id
            ack.digest_ack.list_id = d.list_id
            self._send(ack)
        elif kind == "error":
            self.stats.stream_errors.append(f"{_CODE_NAMES.get(resp.error.canonical_code)}: "
                                            f"{resp.error.message}")

    def _send(self, req: P.StreamMessageRequest) -> None:
        if self._requests is None:
            raise ConnectError(f"switch {self.name}: not connected")
        self._requests.put(req)

    def _drop_channel(self) -> None:
        if self._requests is not None:
            self._requests.put(_STREAM_END)
        if self._channel is not None:
            self._channel.close()
        self._channel = self._stub = None
        self._requests = None

    def close(self) -> None:
        """End the stream and the channel (idempotent)."""
        self._closed.set()
        self._drop_channel()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- unary RPCs
    @property
    def stub(self) -> PG.P4RuntimeStub:
        if self._stub is None:
            raise ConnectError(f"switch {self.name}: not connected (call connect())")
        return self._stub

    def _rpc_error(self, what: str, exc: grpc.RpcError) -> RpcError:
        code = exc.code().name  # type: ignore[attr-defined]
        return RpcError(f"switch {self.name}: {what} failed: {code}: {exc.details()}",  # type: ignore[attr-defined]
                        code=code)

    def set_pipeline(self, p4info: P4I.P4Info | bytes, device_config: bytes, *,
                     action: int = P.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
                     cookie: int = 0) -> None:
        """Install P4Info (a message, or one serialised) + device config; a refusal
        raises PipelineError with the switch's reason."""
        req = P.SetForwardingPipelineConfigRequest(device_id=self.device_id, action=action)
        req.election_id.CopyFrom(_uint128(self.election_id))
        if isinstance(p4info, bytes):
            req.config.p4info.ParseFromString(p4info)
        else:
            req.config.p4info.CopyFrom(p4info)
        req.config.p4_device_config = device_config
        req.config.cookie.cookie = cookie
        try:
            self.stub.SetForwardingPipelineConfig(req, timeout=max(60.0, self.timeout_s))
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ConnectError(f"switch {self.name}: pipeline push failed: {code.name}: "
                                   f"{exc.details()}") from None  # type: ignore[attr-defined]
            if code == grpc.StatusCode.PERMISSION_DENIED:
                raise ArbitrationError(f"switch {self.name}: pipeline push refused, not primary: "
                                       f"{exc.details()}") from None  # type: ignore[attr-defined]
            raise PipelineError(f"switch {self.name}: pipeline rejected: {code.name}: "
                                f"{exc.details()}") from None  # type: ignore[attr-defined]

    def get_pipeline(self) -> tuple[P4I.P4Info | None, int]:
        """(P4Info installed or None, cookie)."""
        req = P.GetForwardingPipelineConfigRequest(
            device_id=self.device_id,
            response_type=P.GetForwardingPipelineConfigRequest.P4INFO_AND_COOKIE)
        try:
            resp = self.stub.GetForwardingPipelineConfig(req, timeout=self.timeout_s)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.FAILED_PRECONDITION:  # type: ignore[attr-defined]
                return None, 0
            raise self._rpc_error("GetForwardingPipelineConfig", exc) from None
        if not resp.config.HasField("p4info") or not resp.config.p4info.tables and \
                not resp.config.p4info.actions:
            return None, resp.config.cookie.cookie
        return resp.config.p4info, resp.config.cookie.cookie

    def write(self, updates: list[P.Update], *, describe: Callable[[P.Update], str] | None = None,
              atomicity: int = P.WriteRequest.CONTINUE_ON_ERROR) -> None:
        """One Write; refused updates raise WriteError naming each of them (via `describe`)."""
        if not updates:
            return
        req = P.WriteRequest(device_id=self.device_id, atomicity=atomicity)
        req.election_id.CopyFrom(_uint128(self.election_id))
        req.updates.extend(updates)
        try:
            self.stub.Write(req, timeout=max(30.0, self.timeout_s))
        except grpc.RpcError as exc:
            raise self._write_error(exc, updates, describe) from None

    def _write_error(self, exc: grpc.RpcError, updates: list[P.Update],
                     describe: Callable[[P.Update], str] | None) -> Exception:
        code = exc.code()  # type: ignore[attr-defined]
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return ConnectError(f"switch {self.name}: write failed: {code.name}: {exc.details()}")  # type: ignore[attr-defined]
        desc = describe or (lambda u: str(u).replace("\n", " "))
        details = b""
        for key, value in (exc.trailing_metadata() or ()):  # type: ignore[attr-defined]
            if key == "grpc-status-details-bin":
                details = value
        failures: list[UpdateFailure] = []
        if details:
            st = status_pb2.Status.FromString(details)
            for i, anyd in enumerate(st.details):
                err = P.Error()
                if not anyd.Unpack(err) or err.canonical_code == code_pb2.OK:
                    continue
                upd = desc(updates[i]) if i < len(updates) else "?"
                failures.append(UpdateFailure(index=i, update=upd, code=_CODE_NAMES.get(
                    err.canonical_code, str(err.canonical_code)), message=err.message))
        if not failures:
            if code == grpc.StatusCode.PERMISSION_DENIED:
                return ArbitrationError(f"switch {self.name}: write refused, not primary: {exc.details()}")  # type: ignore[attr-defined]
            upd = desc(updates[0]) if len(updates) == 1 else f"{len(updates)} updates"
            failures.append(UpdateFailure(index=0, update=upd, code=code.name,
                                          message=exc.details() or ""))  # type: ignore[attr-defined]
        return WriteError(self.name, failures, total=len(updates))

    def read(self, entities: Iterable[P.Entity]) -> list[P.Entity]:
        """All entities matching the queries."""
        req = P.ReadRequest(device_id=self.device_id)
        req.entities.extend(entities)
        try:
            return [e for resp in self.stub.Read(req, timeout=max(30.0, self.timeout_s)) for e in resp.entities]
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise ConnectError(f"switch {self.name}: read failed: {code.name}: {exc.details()}") from None  # type: ignore[attr-defined]
            raise self._rpc_error("Read", exc) from None

    def read_table_entries(self, table_id: int = 0) -> list[P.TableEntry]:
        e = P.Entity()
        e.table_entry.table_id = table_id
        return [x.table_entry for x in self.read([e])]

    def read_default_entry(self, table_id: int) -> P.TableEntry:
        e = P.Entity()
        e.table_entry.table_id = table_id
        e.table_entry.is_default_action = True
        got = self.read([e])
        return got[0].table_entry if got else P.TableEntry(table_id=table_id, is_default_action=True)

    def read_counter(self, counter_id: int, index: int | None = None) -> dict[int, tuple[int, int]]:
        """index -> (packets, bytes)."""
        e = P.Entity()
        e.counter_entry.counter_id = counter_id
        if index is not None:
            e.counter_entry.index.index = index
        return {x.counter_entry.index.index: (x.counter_entry.data.packet_count, x.counter_entry.data.byte_count)
                for x in self.read([e])}

    def read_register(self, register_id: int, index: int | None = None) -> dict[int, int]:
        """index -> value (registers read as P4Data bitstrings)."""
        e = P.Entity()
        e.register_entry.register_id = register_id
        if index is not None:
            e.register_entry.index.index = index
        out: dict[int, int] = {}
        for x in self.read([e]):
            d = x.register_entry.data
            out[x.register_entry.index.index] = int.from_bytes(d.bitstring, "big") if \
                d.WhichOneof("data") == "bitstring" else 0
        return out

    def read_registers(self, register_ids: Sequence[int], indexes: Sequence[int] | None = None
                       ) -> dict[int, dict[int, int]]:
        """Several registers in one Read (one round trip, one answer): register id ->
        index -> value; only the cells ``indexes`` of each when given (all otherwise).
        Why: a poller reading a few registers of many switches each tick pays a round
        trip per Read, which on a loaded machine is most of it; and a port-indexed
        register has a cell per possible port (512) where a switch uses a few."""
        ents = []
        for rid in register_ids:
            for index in (None,) if indexes is None else indexes:
                e = P.Entity()
                e.register_entry.register_id = rid
                if index is not None:
                    e.register_entry.index.index = index
                ents.append(e)
        out: dict[int, dict[int, int]] = {rid: {} for rid in register_ids}
        for x in self.read(ents):
            d = x.register_entry.data
            out.setdefault(x.register_entry.register_id, {})[x.register_entry.index.index] = \
                int.from_bytes(d.bitstring, "big") if d.WhichOneof("data") == "bitstring" else 0
        return out

    def write_register(self, register_id: int, index: int, value: int, bitwidth: int) -> None:
        u = P.Update(type=P.Update.MODIFY)
        u.entity.register_entry.register_id = register_id
        u.entity.register_entry.index.index = index
        u.entity.register_entry.data.bitstring = value.to_bytes(max(1, (bitwidth + 7) // 8), "big")
        self.write([u])

    def read_clone_sessions(self) -> list[P.PacketReplicationEngineEntry]:
        e = P.Entity()
        e.packet_replication_engine_entry.clone_session_entry.SetInParent()
        return [x.packet_replication_engine_entry for x in self.read([e])]

    def enable_digest(self, digest_id: int, *, max_timeout_ns: int = 0, max_list_size: int = 1,
                      ack_timeout_ns: int = 1_000_000) -> None:
        """Insert (or modify, when it exists) the digest's config so digests stream in."""
        for utype in (P.Update.INSERT, P.Update.MODIFY):
            u = P.Update(type=utype)
            d = u.entity.digest_entry
            d.digest_id = digest_id
            d.config.max_timeout_ns = max_timeout_ns
            d.config.max_list_size = max_list_size
            d.config.ack_timeout_ns = ack_timeout_ns
            try:
                self.write([u])
                return
            except WriteError as exc:
                if utype == P.Update.MODIFY or "ALREADY_EXISTS" not in str(exc):
                    raise

    def packet_out(self, payload: bytes, metadata: Iterable[tuple[int, bytes]] = ()) -> None:
        """Send a PacketOut on the stream; `metadata` as (metadata id, canonical bytes)."""
        req = P.StreamMessageRequest()
        req.packet.payload = payload
        for mid, value in metadata:
            req.packet.metadata.add(metadata_id=mid, value=value)
        self._send(req)


def _speaks_tls(address: str, timeout_s: float = 1.0) -> bool:
    """Whether the server at ``host:port`` completes a TLS handshake (certificates not
    checked): a plain-text gRPC channel to a TLS server never becomes ready and says
    nothing more than a timeout."""
    import socket
    import ssl

    host, _, port = address.rpartition(":")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as raw, \
                ctx.wrap_socket(raw, server_hostname=host.strip("[]") or None):
            return True
    except ssl.SSLError as exc:   # a TLS server that wants a client certificate still
        return "CERTIFICATE_REQUIRED" in str(exc) or "alert" in str(exc).lower()
    except (OSError, ValueError):
        return False
