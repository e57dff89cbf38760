"""The V1Switch pipeline with BMv2 simple_switch rules.

parser -> verifyChecksum -> ingress -> traffic manager -> egress ->
computeChecksum -> deparser, plus clone (I2E/E2E), resubmit, recirculate and
multicast. Work is split into jobs (`IngressJob`, `EgressJob`) so a queued
traffic manager can sit between ingress and egress: `run_ingress` returns the
egress jobs it produced, `run_egress` the outputs; `process` runs both with an
immediate (zero-delay) traffic manager.

BMv2 rules kept here (simple_switch.cpp):
* a parser error does not drop the packet: ``parser_error`` is set, the headers
  extracted so far stay valid, ingress runs, unparsed bytes follow as payload;
* after ingress: I2E clone first (the packet as it entered, parsed again, with
  the preserved field list), then resubmit (replaces the packet), then
  multicast (``mcast_grp`` != 0 replaces unicast), then ``egress_spec`` == the
  drop port (511, the architecture's `drop_port`) drops, else unicast to
  ``egress_spec``;
* after egress: E2E clone (copy of the egress headers and preserved fields),
  drop if ``egress_spec`` == the drop port, deparse, recirculate (replaces
  transmission).

The program must be compiled for a `V1Model` architecture: its externs record
their requests in the `V1PacketContext` this pipeline reads, and its drop port
is the one ``mark_to_drop`` writes.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from softswitch.backends.python.layout import attr_name, strip
from softswitch.backends.python.program import CompiledProgram
from softswitch.errors import (
    DropSignal,
    ExitSignal,
    PacketTooShort,
    ParserErrorSignal,
    SoftswitchError,
    StackOutOfBounds,
    VarbitLengthError,
)
from softswitch.lowering.names import annotation_ints
from softswitch.packet import PacketReader, PacketWriter
from softswitch.trace import TraceEvent
from softswitch.v1model.architecture import CloneType, V1Model, V1PacketContext
from softswitch.v1model.jobs import EgressJob, IngressJob, InstanceType, OutputPacket, QueueInfo
from softswitch.v1model.pre import ReplicationEngine

LOG = logging.getLogger("softswitch.v1model")
MAX_PASSES = 64  # resubmit/recirculate loops per injected packet


@dataclass(slots=True, frozen=True)
class PipelineTypes:
    """The classes of the values V1Switch's blocks share, and the field lists
    ``@field_list(N)`` marks in the user metadata (what clones keep)."""

    header_cls: type
    meta_cls: type
    sm_cls: type
    field_lists: dict[int, list[str]]


def pipeline_types(program: Any) -> PipelineTypes:
    """Header, metadata and standard-metadata classes of a compiled program: the
    parser's parameters 2-4 (``out H, inout M, inout standard_metadata_t``)."""
    checked = program.checked
    params = checked.main.block("p").decl.params
    hdr_t, meta_t, sm_t = (p.type_ref.type for p in params[1:4])
    meta_decl = checked.top_level.get(getattr(strip(meta_t), "name", ""))
    field_lists: dict[int, list[str]] = {}
    for f in getattr(meta_decl, "fields", []) or []:
        for idx in annotation_ints(f, "field_list"):
            field_lists.setdefault(idx, []).append(attr_name(f.name))
    lay = program.layouts
    return PipelineTypes(header_cls=lay.class_for(hdr_t), meta_cls=lay.class_for(meta_t),
                         sm_cls=lay.class_for(sm_t), field_lists=field_lists)


@dataclass(slots=True)
class Stats:
    packets_in: int = 0
    packets_out: int = 0
    drops: int = 0


class V1Switch:
    """Runs a compiled v1model program on packets. Not thread-safe: one packet at a time."""

    def __init__(self, program: CompiledProgram, *, clock_us: Callable[[], int] | None = None,
                 name: str = "softswitch") -> None:
        arch = program.arch
        if not isinstance(arch, V1Model) or not isinstance(program.pk, V1PacketContext):
            raise SoftswitchError(f"V1Switch runs programs compiled for v1model, not {arch.name}")
        self.program = program
        self.name = name
        self.pre = ReplicationEngine()
        self.drop_port = arch.drop_port  # what mark_to_drop wrote into the compiled code
        types = pipeline_types(program)
        self._header_cls, self._meta_cls, self._sm_cls = types.header_cls, types.meta_cls, types.sm_cls
        self._field_lists = types.field_lists
        self.stats = Stats()
        start = time.monotonic_ns()
        self.clock_us = clock_us or (lambda: (time.monotonic_ns() - start) // 1000)
        b = program.blocks
        self._parser, self._verify, self._ingress = b["p"], b["vr"], b["ig"]
        self._egress, self._compute, self._deparser = b["eg"], b["ck"], b["dep"]
        self._names = program.block_names
        self._pk: V1PacketContext = program.pk
        self._trace: list[TraceEvent] | None = None
        # Plug point for a traffic manager: called for each packet entering egress;
        # its QueueInfo fills the queueing fields of standard_metadata.
        self.queue_model: Callable[[EgressJob], QueueInfo] | None = None
        e = program.errors
        self._err_short = e.index("PacketTooShort") if "PacketTooShort" in e else 1
        self._err_stack = e.index("StackOutOfBounds") if "StackOutOfBounds" in e else 3
        self._error_codes = {name: i for i, name in enumerate(e)}

    # ---------------------------------------------------------------- helpers
    def _event(self, kind: str, block: str, **detail: Any) -> None:
        if self._trace is not None:
            self._trace.append(TraceEvent(kind, block, detail))

    def _preserve(self, meta: Any, fl: int | None) -> dict[str, Any]:
        if fl is None or fl < 0:
            return {}
        return {n: getattr(meta, n) for n in self._field_lists.get(fl, [])}

    def _parse(self, data: bytes, port: int, itype: int, preserved: dict[str, Any] | None) -> tuple:
        pk = self._pk
        hdr, meta, sm = self._header_cls(), self._meta_cls(), self._sm_cls()
        if preserved:
            for k, v in preserved.items():
                setattr(meta, k, v)
        now = self.clock_us()
        sm.ingress_port = port
        sm.instance_type = itype
        sm.packet_length = len(data)
        sm.ingress_global_timestamp = now
        pk.reset_requests()
        pk.length = len(data)
        pk.now_us = now
        pk.sm = sm
        reader = PacketReader(data)
        try:
            self._parser(reader, hdr, meta, sm)
        except VarbitLengthError as exc:
            sm.parser_error = self._error_codes.get(exc.error_name, self._err_short)
            self._event("parser_error", self._names["p"], error=exc.error_name, message=str(exc))
        except PacketTooShort as exc:
            sm.parser_error = self._err_short
            self._event("parser_error", self._names["p"], error="PacketTooShort", message=str(exc))
        except StackOutOfBounds as exc:
            sm.parser_error = self._err_stack
            self._event("parser_error", self._names["p"], error="StackOutOfBounds", message=str(exc))
        except ParserErrorSignal as exc:
            if exc.code > 0:
                sm.parser_error = exc.code
            self._event("parser_error", self._names["p"], error=exc.error_name if exc.code >= 0 else "reject")
        return hdr, meta, sm, reader.payload()

    # ---------------------------------------------------------------- ingress
    def run_ingress(self, job: IngressJob) -> tuple[list[IngressJob], list[EgressJob]]:
        """Parser, checksum verification and ingress; returns new ingress and egress jobs."""
        pk = self._pk
        if self._trace is not None:
            self._event("packet_in", "switch", port=job.port, length=len(job.data),
                        instance_type=job.instance_type, packet_id=self.stats.packets_in)
        hdr, meta, sm, payload = self._parse(job.data, job.port, job.instance_type, job.preserved)
        pk.payload = payload
        try:
            self._verify(hdr, meta)
        except ExitSignal:
            pass
        if pk.checksum_error:
            sm.checksum_error = 1
        pk.reset_requests()
        try:
            self._ingress(hdr, meta, sm)
        except ExitSignal:
            pass
        except (DropSignal, StackOutOfBounds) as exc:
            self._drop(self._names["ig"], str(exc))
            return [], []
        ing_jobs: list[IngressJob] = []
        eg_jobs: list[EgressJob] = []
        clone_type, clone_session, clone_fl = pk.clone_type, pk.clone_session, pk.clone_fl
        resubmit_fl = pk.resubmit_fl
        # I2E clone: the packet as it entered ingress, parsed again
        if clone_type == CloneType.I2E:
            session = self.pre.sessions.get(clone_session)
            if session is None:
                self._event("extern", self._names["ig"], extern="clone",
                            note=f"clone session {clone_session} not configured: no clone")
            else:
                keep = self._preserve(meta, clone_fl)
                for rep in session.replicas:
                    saved_trace = self._trace
                    self._trace = None
                    c_hdr, c_meta, c_sm, c_payload = self._parse(job.data, job.port,
                                                                 InstanceType.INGRESS_CLONE, keep)
                    self._trace = saved_trace
                    c_sm.egress_port = rep.port
                    c_sm.egress_rid = rep.rid
                    eg_jobs.append(EgressJob(hdr=c_hdr, meta=c_meta, sm=c_sm, payload=c_payload,
                                             egress_port=rep.port,
                                             instance_type=InstanceType.INGRESS_CLONE,
                                             truncate=session.truncate, passes=job.passes,
                                             length=len(job.data)))
        if resubmit_fl is not None:
            if job.passes + 1 >= MAX_PASSES:
                self._drop(self._names["ig"], f"resubmit loop exceeded {MAX_PASSES} passes")
            else:
                ing_jobs.append(IngressJob(port=job.port, data=job.data,
                                           instance_type=InstanceType.RESUBMIT,
                                           preserved=self._preserve(meta, resubmit_fl),
                                           passes=job.passes + 1))
            return ing_jobs, eg_jobs
        if sm.mcast_grp:
            replicas = self.pre.groups.get(sm.mcast_grp)
            if not replicas:
                self._drop(self._names["ig"], f"multicast group {sm.mcast_grp} has no replicas")
                return ing_jobs, eg_jobs
            for i, rep in enumerate(replicas):
                last = i == len(replicas) - 1
                r_hdr = hdr if last else hdr._copy()
                r_meta = meta if last else meta._copy()
                r_sm = sm if last else sm._copy()
                r_sm.egress_port = rep.port
                r_sm.egress_rid = rep.rid
                r_sm.instance_type = InstanceType.REPLICATION
                eg_jobs.append(EgressJob(hdr=r_hdr, meta=r_meta, sm=r_sm, payload=payload,
                                         egress_port=rep.port, instance_type=InstanceType.REPLICATION,
                                         passes=job.passes, length=len(job.data)))
            return ing_jobs, eg_jobs
        if sm.egress_spec == self.drop_port:
            self._drop(self._names["ig"], "egress_spec is the drop port (mark_to_drop)")
            return ing_jobs, eg_jobs
        sm.egress_port = sm.egress_spec
        eg_jobs.append(EgressJob(hdr=hdr, meta=meta, sm=sm, payload=payload,
                                 egress_port=sm.egress_spec, instance_type=job.instance_type,
                                 truncate=pk.truncate, passes=job.passes, length=len(job.data)))
        return ing_jobs, eg_jobs

    def _drop(self, block: str, reason: str) -> None:
        self.stats.drops += 1
        self._event("drop", block, reason=reason)
        if LOG.isEnabledFor(logging.DEBUG):
            LOG.debug("%s: packet %d dropped in %s: %s", self.name, self.stats.packets_in, block, reason)

    # ----------------------------------------------------------------- egress
    def run_egress(self, job: EgressJob) -> tuple[list[IngressJob], list[EgressJob], list[OutputPacket]]:
        """Egress, checksum update and deparser for one queued packet."""
        pk = self._pk
        hdr, meta, sm = job.hdr, job.meta, job.sm
        now = self.clock_us()
        sm.egress_port = job.egress_port
        if job.instance_type in (InstanceType.RESUBMIT, InstanceType.RECIRC):
            sm.instance_type = InstanceType.NORMAL
        else:
            sm.instance_type = job.instance_type
        sm.egress_global_timestamp = now
        if self.queue_model is not None:
            q = self.queue_model(job)
            if q.departure_us is not None:
                sm.egress_global_timestamp = q.departure_us
            sm.enq_qdepth = q.enq_qdepth & 0x7FFFF
            sm.deq_qdepth = q.deq_qdepth & 0x7FFFF
            sm.deq_timedelta = q.deq_timedelta_us & 0xFFFFFFFF
            enq = q.enq_timestamp_us if q.enq_timestamp_us is not None else now - q.deq_timedelta_us
            sm.enq_timestamp = enq & 0xFFFFFFFF
        else:
            sm.enq_timestamp = now & 0xFFFFFFFF
            sm.deq_timedelta = 0
        pk.reset_requests()
        pk.length = sm.packet_length
        pk.now_us = now
        pk.sm = sm
        pk.payload = job.payload
        ing_jobs: list[IngressJob] = []
        eg_jobs: list[EgressJob] = []
        try:
            self._egress(hdr, meta, sm)
        except ExitSignal:
            pass
        except (DropSignal, StackOutOfBounds) as exc:
            self._drop(self._names["eg"], str(exc))
            return [], [], []
        if pk.clone_type == CloneType.E2E:
            session = self.pre.sessions.get(pk.clone_session)
            if session is not None:
                keep = self._preserve(meta, pk.clone_fl)
                for rep in session.replicas:
                    c_meta = self._meta_cls()
                    for k, v in keep.items():
                        setattr(c_meta, k, v)
                    c_sm = self._sm_cls()
                    c_sm.ingress_port = sm.ingress_port
                    c_sm.packet_length = sm.packet_length
                    c_sm.egress_rid = rep.rid
                    eg_jobs.append(EgressJob(hdr=hdr._copy(), meta=c_meta, sm=c_sm, payload=job.payload,
                                             egress_port=rep.port, instance_type=InstanceType.EGRESS_CLONE,
                                             truncate=session.truncate, passes=job.passes,
                                             length=job.length))
        if sm.egress_spec == self.drop_port:
            self._drop(self._names["eg"], "egress_spec is the drop port (mark_to_drop in egress)")
            return ing_jobs, eg_jobs, []
        try:
            self._compute(hdr, meta)
        except ExitSignal:
            pass
        writer = PacketWriter()
        self._deparser(writer, hdr)
        data = writer.to_bytes() + job.payload
        recirc_fl = pk.recirc_fl
        if recirc_fl is not None:
            if job.passes + 1 >= MAX_PASSES:
                self._drop(self._names["eg"], f"recirculation loop exceeded {MAX_PASSES} passes")
            else:
                ing_jobs.append(IngressJob(port=sm.ingress_port, data=data,
                                           instance_type=InstanceType.RECIRC,
                                           preserved=self._preserve(meta, recirc_fl),
                                           passes=job.passes + 1))
            return ing_jobs, eg_jobs, []
        cut = pk.truncate or job.truncate
        if cut:
            data = data[:cut]
        self.stats.packets_out += 1
        if self._trace is not None:
            self._event("output", self._names["dep"], port=job.egress_port, length=len(data),
                        instance_type=int(job.instance_type))
        return ing_jobs, eg_jobs, [OutputPacket(job.egress_port, data, int(job.instance_type))]

    # ------------------------------------------------------------------ entry
    def process_packet(self, port: int, data: bytes, *, trace: bool = False
                       ) -> tuple[list[OutputPacket], list[TraceEvent]]:
        """Run one packet through the whole switch with an immediate traffic manager."""
        if not 0 <= port < self.drop_port:
            raise SoftswitchError(f"process: ingress port {port} outside 0..{self.drop_port - 1}")
        events: list[TraceEvent] = []
        self._trace = events if trace else None
        self._pk.trace = self._trace
        self.stats.packets_in += 1
        outputs: list[OutputPacket] = []
        try:
            # fast path: one packet in, at most one out, no resubmit/recirculation/clones
            first_ing, first_eg = self.run_ingress(IngressJob(port=port, data=bytes(data)))
            if not first_ing and len(first_eg) == 1:
                more_ing, more_eg, outs = self.run_egress(first_eg[0])
                if not more_ing and not more_eg:
                    return outs, events
                first_ing, first_eg = more_ing, more_eg
                outputs.extend(outs)
            ing: deque[IngressJob] = deque(first_ing)
            eg: deque[EgressJob] = deque(first_eg)
            while ing or eg:
                if ing:
                    new_ing, new_eg = self.run_ingress(ing.popleft())
                    ing.extend(new_ing)
                    eg.extend(new_eg)
                    continue
                new_ing, new_eg, outs = self.run_egress(eg.popleft())
                ing.extend(new_ing)
                eg.extend(new_eg)
                outputs.extend(outs)
        finally:
            self._trace = None
            self._pk.trace = None
        return outputs, events

    def process(self, port: int, packet: Any) -> list[tuple[int, bytes]]:
        """Run one packet (bytes or a scapy packet); returns [(egress port, bytes)]."""
        data = bytes(packet)
        outs, _ = self.process_packet(port, data)
        return [(o.port, o.data) for o in outs]
