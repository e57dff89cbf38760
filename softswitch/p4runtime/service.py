"""P4Runtime semantics over a `Device`, with no sockets: the server is a thin shell on this.

Why transport-free: each RPC is a method taking and returning protobufs and
raising `P4RuntimeError`, so the rules (arbitration, pipeline install, per-update
errors, wildcards) live apart from grpcio, which only maps errors to a status.

Write batches run one update at a time, each under the device lock (so packets
never see half an update, and a large batch never stalls forwarding), with
CONTINUE_ON_ERROR: an update either applies fully or changes nothing; failures are
reported per update (`WriteFailed.errors`, one p4.v1.Error per update, OK for the ones that
applied), as PI/BMv2 do.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import grpc
from google.rpc import code_pb2
from p4.v1 import p4runtime_pb2 as P

from softswitch.p4runtime import config as cfg
from softswitch.p4runtime import (
    pre_entries,
    profile_entries,
    stateful_entries,
    table_entries,
    value_set_entries,
)
from softswitch.p4runtime.arbitration import Arbitrator, StreamClient
from softswitch.p4runtime.codec import decode_bits, encode_bits
from softswitch.p4runtime.device import Device, PacketIn, Pipeline
from softswitch.p4runtime.digests import DigestEngine
from softswitch.p4runtime.errors import P4RuntimeError, invalid, not_found, unimplemented
from softswitch.p4runtime.state import PipelineState

LOG = logging.getLogger("softswitch.p4runtime")
API_VERSION = "1.4.1"
READ_CHUNK = 1000

#: The reader of each kind of entity a Read names: (state, the entity's filter) ->
#: the entries.  Table entries (the bulk case, filled in place) and digest configs
#: are read in `P4RuntimeService.read` / `_read_one` themselves.
_READERS: dict[str, Callable[[PipelineState, Any], Iterable[Any]]] = {
    "counter_entry": stateful_entries.read_counters,
    "direct_counter_entry": stateful_entries.read_direct_counters,
    "meter_entry": stateful_entries.read_meters,
    "direct_meter_entry": stateful_entries.read_direct_meters,
    "register_entry": stateful_entries.read_registers,
    "packet_replication_engine_entry": pre_entries.read_pre,
    "value_set_entry": value_set_entries.read_value_sets,
    "action_profile_member": profile_entries.read_members,
    "action_profile_group": profile_entries.read_groups,
}
Action = P.SetForwardingPipelineConfigRequest


class WriteFailed(P4RuntimeError):
    """Some updates of a batch failed; `errors` has one p4.v1.Error per update."""

    def __init__(self, errors: list[P.Error], first: str) -> None:
        super().__init__(grpc.StatusCode.UNKNOWN, f"write: {sum(e.canonical_code != 0 for e in errors)} "
                                                  f"of {len(errors)} updates failed; first: {first}")
        self.errors = errors


def _failed_precondition(what: str) -> P4RuntimeError:
    return P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                          f"{what}: no forwarding pipeline is installed (SetForwardingPipelineConfig first)")


class P4RuntimeService:
    """The P4Runtime service of one device."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self.arbitrator = Arbitrator(device.device_id)
        self._state: PipelineState | None = None
        self._saved: Pipeline | None = None
        self._config_mu = threading.Lock()
        self.digests = DigestEngine(self._send_to_primary)
        if device.pipeline is not None:
            self._state = PipelineState.create(device.pipeline)
        device.add_listener(self)

    def close(self) -> None:
        self.device.remove_listener(self)
        self.digests.close()

    # ---------------------------------------------------------- checks
    def _check_device(self, device_id: int, what: str) -> None:
        if device_id != self.device.device_id:
            raise not_found(f"{what}: device id {device_id} is not this device ({self.device.device_id})")

    def _check_writer_device(self, device_id: int, what: str) -> None:
        """A write for another device id: PERMISSION_DENIED, as PI answers.  The
        specification's NOT_FOUND for an unknown device id is the arbitration rule; a
        writer must be the primary of the device it writes to, and nobody can be the
        primary of a device this server does not have."""
        if device_id != self.device.device_id:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 f"{what}: device id {device_id} is not this device "
                                 f"({self.device.device_id}): no client is its primary")

    @staticmethod
    def _check_role(role: str, role_id: int, what: str) -> None:
        if role or role_id:
            raise unimplemented(f"{what}: roles are not supported (got {role or role_id!r})")

    def _require_state(self, what: str) -> PipelineState:
        st = self._state
        if st is None or self.device.pipeline is not st.pipeline:
            if self.device.pipeline is None:
                raise _failed_precondition(what)
            st = self._state = PipelineState.create(self.device.pipeline)
        return st

    # ---------------------------------------------------- capabilities
    def capabilities(self, req: P.CapabilitiesRequest) -> P.CapabilitiesResponse:
        return P.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # -------------------------------------------------------- pipeline
    def set_pipeline(self, req: P.SetForwardingPipelineConfigRequest) -> P.SetForwardingPipelineConfigResponse:
        what = "SetForwardingPipelineConfig"
        self._check_writer_device(req.device_id, what)
        self._check_role(req.role, req.role_id, what)
        self.arbitrator.check_writer(req.election_id, what)
        action = req.action
        if action == Action.UNSPECIFIED:
            raise invalid(f"{what}: action is UNSPECIFIED")
        with self._config_mu:
            if action == Action.COMMIT:
                if self._saved is None:
                    raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                         f"{what}: COMMIT without a config saved by VERIFY_AND_SAVE")
                self._install(self._saved, reconcile=False)
                self._saved = None
                return P.SetForwardingPipelineConfigResponse()
            pipeline = self._build(req.config, what)
            if action == Action.VERIFY:
                return P.SetForwardingPipelineConfigResponse()
            if action == Action.VERIFY_AND_SAVE:
                self._saved = pipeline
                return P.SetForwardingPipelineConfigResponse()
            if action in (Action.VERIFY_AND_COMMIT, Action.RECONCILE_AND_COMMIT):
                self._install(pipeline, reconcile=action == Action.RECONCILE_AND_COMMIT)
                return P.SetForwardingPipelineConfigResponse()
            raise invalid(f"{what}: unknown action {action}")

    def _build(self, config: P.ForwardingPipelineConfig, what: str) -> Pipeline:
        if not config.HasField("p4info") or not (len(config.p4info.tables) or len(config.p4info.actions)):
            raise invalid(f"{what}: config.p4info is missing or empty")
        src = cfg.decode_device_config(config.p4_device_config)
        switch, built = cfg.build_switch(src, self.device.build_switch,
                                         name=f"device{self.device.device_id}")
        cfg.compare_p4info(config.p4info, built)
        p4info = type(config.p4info)()
        p4info.CopyFrom(config.p4info)
        try:
            return Pipeline.create(switch, p4info, device_config=bytes(config.p4_device_config),
                                   cookie=config.cookie.cookie)
        except P4RuntimeError as exc:
            raise invalid(f"{what}: {exc.message}") from None

    def _install(self, pipeline: Pipeline, *, reconcile: bool) -> None:
        st = PipelineState.create(pipeline)  # captures the program's defaults before reconcile
        with self.device.lock:
            old = self._state
            self.device.set_pipeline(pipeline, reconcile=reconcile)
            self._state = st
            self.digests.reset()
            if reconcile and old is not None:
                for did, conf in old.digest_configs.items():
                    info = st.schema.digests.get(did)
                    if info is not None:
                        st.digest_configs[did] = conf
                        self.digests.configure(info, conf)
        LOG.info("device %d: pipeline installed (%d tables, reconcile=%s)", self.device.device_id,
                 len(pipeline.p4info.tables), reconcile)

    def get_pipeline(self, req: P.GetForwardingPipelineConfigRequest) -> P.GetForwardingPipelineConfigResponse:
        what = "GetForwardingPipelineConfig"
        self._check_device(req.device_id, what)
        pipe = self.device.pipeline
        if pipe is None:
            raise _failed_precondition(what)
        out = P.GetForwardingPipelineConfigResponse()
        rt = P.GetForwardingPipelineConfigRequest
        out.config.cookie.cookie = pipe.cookie
        if req.response_type in (rt.ALL, rt.P4INFO_AND_COOKIE):
            out.config.p4info.CopyFrom(pipe.p4info)
        if req.response_type in (rt.ALL, rt.DEVICE_CONFIG_AND_COOKIE):
            out.config.p4_device_config = pipe.device_config
        return out

    # ----------------------------------------------------------- write
    def write(self, req: P.WriteRequest) -> P.WriteResponse:
        what = "Write"
        self._check_writer_device(req.device_id, what)
        self._check_role(req.role, req.role_id, what)
        self.arbitrator.check_writer(req.election_id, what)
        if req.atomicity != P.WriteRequest.CONTINUE_ON_ERROR:
            label = next((k for k, v in P.WriteRequest.Atomicity.items() if v == req.atomicity),
                         str(req.atomicity))
            raise unimplemented(f"{what}: atomicity {label} is not supported (only CONTINUE_ON_ERROR)")
        errors: list[P.Error] = []
        first = ""
        with self.device.lock:
            self._require_state(what)  # FAILED_PRECONDITION before any update
        for i, upd in enumerate(req.updates):
            # the lock is taken per update, so a large batch never stalls forwarding for long
            with self.device.lock:
                try:
                    self._apply(self._require_state(what), upd)
                    errors.append(P.Error(canonical_code=code_pb2.OK))
                except P4RuntimeError as exc:
                    errors.append(P.Error(canonical_code=exc.code.value[0], message=exc.message,
                                          space="softswitch"))
                    first = first or f"update {i}: {exc.code.name}: {exc.message}"
                except Exception as exc:
                    LOG.exception("device %d: update %d failed unexpectedly", self.device.device_id, i)
                    errors.append(P.Error(canonical_code=code_pb2.INTERNAL,
                                          message=f"internal error: {type(exc).__name__}: {exc}",
                                          space="softswitch"))
                    first = first or f"update {i}: INTERNAL: {exc}"
        if first:
            raise WriteFailed(errors, first)
        return P.WriteResponse()

    def _apply(self, st: PipelineState, upd: P.Update) -> None:
        ent = upd.entity
        kind = ent.WhichOneof("entity")
        t = upd.type
        if t not in (P.Update.INSERT, P.Update.MODIFY, P.Update.DELETE):
            raise invalid(f"update type {'UNSPECIFIED' if t == 0 else t} is not INSERT, MODIFY or DELETE")
        if kind == "table_entry":
            table_entries.write_table_entry(st, t, ent.table_entry)
        elif kind == "counter_entry":
            stateful_entries.write_counter(st, t, ent.counter_entry)
        elif kind == "direct_counter_entry":
            stateful_entries.write_direct_counter(st, t, ent.direct_counter_entry)
        elif kind == "meter_entry":
            stateful_entries.write_meter(st, t, ent.meter_entry)
        elif kind == "direct_meter_entry":
            stateful_entries.write_direct_meter(st, t, ent.direct_meter_entry)
        elif kind == "register_entry":
            stateful_entries.write_register(st, t, ent.register_entry)
        elif kind == "packet_replication_engine_entry":
            pre_entries.write_pre(st, t, ent.packet_replication_engine_entry)
        elif kind == "digest_entry":
            self._write_digest(st, t, ent.digest_entry)
        elif kind == "value_set_entry":
            value_set_entries.write_value_set(st, t, ent.value_set_entry)
        elif kind == "action_profile_member":
            profile_entries.write_member(st, t, ent.action_profile_member)
        elif kind == "action_profile_group":
            profile_entries.write_group(st, t, ent.action_profile_group)
        elif kind is None:
            raise invalid("update has no entity")
        else:
            raise unimplemented(f"{kind} is not supported by softswitch")

    def _write_digest(self, st: PipelineState, utype: int, de: P.DigestEntry) -> None:
        info = st.schema.digest(de.digest_id)
        where = f"digest {info.name}"
        exists = info.id in st.digest_configs
        if utype == P.Update.DELETE:
            if not exists:
                raise not_found(f"{where} is not configured")
            del st.digest_configs[info.id]
            self.digests.configure(info, None)
            return
        if utype == P.Update.INSERT and exists:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{where} is already configured")
        if utype == P.Update.MODIFY and not exists:
            raise not_found(f"{where} is not configured")
        if not de.HasField("config"):
            raise invalid(f"{where}: config is missing")
        c = de.config
        if c.max_timeout_ns < 0 or c.ack_timeout_ns < 0 or c.max_list_size < 0:
            raise invalid(f"{where}: negative config value")
        conf = P.DigestEntry.Config()
        conf.CopyFrom(c)
        st.digest_configs[info.id] = conf
        self.digests.configure(info, conf)

    # ------------------------------------------------------------ read
    def read(self, req: P.ReadRequest) -> Iterator[P.ReadResponse]:
        what = "Read"
        self._check_device(req.device_id, what)
        self._check_role(req.role, 0, what)
        responses = [P.ReadResponse()]

        def new_entity() -> P.Entity:
            if len(responses[-1].entities) >= READ_CHUNK:
                responses.append(P.ReadResponse())
            return responses[-1].entities.add()

        with self.device.lock:
            self._require_state(what)
        for ent in req.entities:
            with self.device.lock:  # one consistent view per entity query
                st = self._require_state(what)
                if ent.WhichOneof("entity") == "table_entry":  # the bulk case: filled in place
                    table_entries.read_table_entries(st, ent.table_entry, lambda: new_entity().table_entry)
                    continue
                for x in self._read_one(st, ent):
                    new_entity().CopyFrom(x)
        yield from responses

    def _read_one(self, st: PipelineState, ent: P.Entity) -> Iterator[P.Entity]:
        kind = ent.WhichOneof("entity")
        reader = _READERS.get(kind or "")
        if reader is not None:
            assert kind is not None
            for x in reader(st, getattr(ent, kind)):
                yield P.Entity(**{kind: x})
        elif kind == "digest_entry":
            did = ent.digest_entry.digest_id
            ids = sorted(st.digest_configs) if did == 0 else [st.schema.digest(did).id]
            for d in ids:
                if d in st.digest_configs:
                    yield P.Entity(digest_entry=P.DigestEntry(digest_id=d, config=st.digest_configs[d]))
        elif kind is None:
            raise invalid("read: an entity with nothing set")
        else:
            raise unimplemented(f"read of {kind} is not supported by softswitch")

    # ---------------------------------------------------------- stream
    def open_stream(self, client: StreamClient) -> StreamSession:
        return StreamSession(self, client)

    def _send_to_primary(self, msg: P.StreamMessageResponse) -> bool:
        p = self.arbitrator.primary()
        if p is None:
            return False
        p.send(msg)
        return True

    # DeviceListener: called from the data path, never blocks
    def on_packet_in(self, packet: PacketIn) -> None:
        pipe = self.device.pipeline
        header = pipe.packet_in if pipe is not None else None
        msg = P.StreamMessageResponse()
        msg.packet.payload = packet.payload
        if header is not None:
            for f in header.fields:
                if f.name in packet.metadata:
                    msg.packet.metadata.add(metadata_id=f.id, value=encode_bits(packet.metadata[f.name]))
        self._send_to_primary(msg)

    def on_digest(self, name: str, values: list[tuple[Any, ...]]) -> None:
        self.digests.push(name, values)


class StreamSession:
    """One StreamChannel: arbitration, packet-out, digest acks from one client."""

    def __init__(self, service: P4RuntimeService, client: StreamClient) -> None:
        self.service = service
        self.client = client
        self.arbitrated = False

    def handle(self, req: P.StreamMessageRequest) -> None:
        """Process one message; raises P4RuntimeError only when the stream must end."""
        kind = req.WhichOneof("update")
        svc = self.service
        if kind == "arbitration":
            svc.arbitrator.arbitrate(self.client, req.arbitration)
            self.arbitrated = True
            return
        if not self.arbitrated:
            raise P4RuntimeError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"StreamChannel: the first message must be an arbitration update, got {kind}")
        if kind == "packet":
            try:
                self._packet_out(req.packet)
            except P4RuntimeError as exc:
                self._stream_error(exc, packet=req.packet)
        elif kind == "digest_ack":
            if svc.arbitrator.primary() is self.client:
                svc.digests.ack(req.digest_ack.digest_id, req.digest_ack.list_id)
        else:
            self._stream_error(unimplemented(f"StreamChannel: {kind} messages are not supported"))

    def _packet_out(self, pkt: P.PacketOut) -> None:
        svc = self.service
        if svc.arbitrator.primary() is not self.client:
            raise P4RuntimeError(grpc.StatusCode.PERMISSION_DENIED,
                                 "packet-out: refused: this client is not the primary")
        pipe = svc.device.pipeline
        if pipe is None:
            raise _failed_precondition("packet-out")
        meta: dict[str, int] = {}
        header = pipe.packet_out
        for m in pkt.metadata:
            f = header.by_id(m.metadata_id) if header is not None else None
            if f is None:
                raise invalid(f"packet-out: no packet_out metadata with id {m.metadata_id}")
            if f.name in meta:
                raise invalid(f"packet-out: metadata {f.name} given twice")
            meta[f.name] = decode_bits(m.value, f.bitwidth, f"packet-out metadata {f.name}")
        svc.device.packet_out(pkt.payload, meta)

    def _stream_error(self, exc: P4RuntimeError, packet: P.PacketOut | None = None) -> None:
        msg = P.StreamMessageResponse()
        msg.error.canonical_code = exc.code.value[0]
        msg.error.message = exc.message
        msg.error.space = "softswitch"
        if packet is not None:
            msg.error.packet_out.packet_out.CopyFrom(packet)
        self.client.send(msg)

    def close(self) -> None:
        self.service.arbitrator.remove(self.client)
