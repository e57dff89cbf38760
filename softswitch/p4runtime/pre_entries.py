"""PacketReplicationEngineEntry: multicast groups and clone sessions.

Why INSERT/MODIFY are checked here: the replication engine's ``session_set``
creates or replaces, while P4Runtime distinguishes the two (ALREADY_EXISTS on a
second INSERT, NOT_FOUND on MODIFY of an absent session).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator

import grpc
from p4.v1 import p4runtime_pb2 as P

from softswitch.errors import RuntimeApiError
from softswitch.p4runtime.codec import decode_bits, encode_bits
from softswitch.p4runtime.errors import P4RuntimeError, invalid, not_found, unimplemented
from softswitch.p4runtime.state import PipelineState
from softswitch.v1model.ports import MAX_PORT, PORT_BITS
from softswitch.v1model.pre import Replica


def _replicas(reps: list[P.Replica], where: str) -> list[Replica]:
    out = []
    for r in reps:
        kind = r.WhichOneof("port_kind")
        if kind == "port":
            port = decode_bits(r.port, PORT_BITS, f"{where}: replica port")
        else:
            port = r.egress_port
        if port > MAX_PORT:
            raise invalid(f"{where}: replica egress port {port} outside 0..{MAX_PORT}")
        if r.instance >= 1 << 16:
            raise invalid(f"{where}: replica instance {r.instance} does not fit 16 bits")
        rep = Replica(port=port, rid=r.instance)
        if rep in out:
            raise invalid(f"{where}: replica (port {port}, instance {r.instance}) given twice")
        out.append(rep)
    return out


def _runtime(call: Callable[[], object]) -> None:
    try:
        call()
    except RuntimeApiError as exc:
        raise P4RuntimeError.from_runtime(exc) from None


def write_pre(st: PipelineState, utype: int, pre: P.PacketReplicationEngineEntry) -> None:
    kind = pre.WhichOneof("type")
    rt = st.pipeline.switch.runtime
    if kind == "multicast_group_entry":
        g = pre.multicast_group_entry
        where = f"multicast group {g.multicast_group_id}"
        if g.multicast_group_id == 0:
            raise invalid(f"{where}: group id 0 is not valid")
        if g.metadata:
            raise unimplemented(f"{where}: multicast group metadata is not supported")
        reps = _replicas(list(g.replicas), where)
        if utype == P.Update.INSERT:
            _runtime(lambda: rt.multicast_group_create(g.multicast_group_id, reps))
        elif utype == P.Update.MODIFY:
            _runtime(lambda: rt.multicast_group_modify(g.multicast_group_id, reps))
        elif utype == P.Update.DELETE:
            _runtime(lambda: rt.multicast_group_delete(g.multicast_group_id))
        else:
            raise invalid(f"{where}: bad update type {utype}")
    elif kind == "clone_session_entry":
        c = pre.clone_session_entry
        where = f"clone session {c.session_id}"
        if c.session_id == 0:
            raise invalid(f"{where}: session id 0 is not valid")
        exists = c.session_id in rt.pre.sessions
        if utype == P.Update.DELETE:
            _runtime(lambda: rt.clone_session_delete(c.session_id))
            return
        if utype == P.Update.INSERT and exists:
            raise P4RuntimeError(grpc.StatusCode.ALREADY_EXISTS, f"{where} exists")
        if utype == P.Update.MODIFY and not exists:
            raise not_found(f"{where} does not exist")
        if utype not in (P.Update.INSERT, P.Update.MODIFY):
            raise invalid(f"{where}: bad update type {utype}")
        if c.packet_length_bytes < 0:
            raise invalid(f"{where}: negative packet_length_bytes {c.packet_length_bytes}")
        reps = _replicas(list(c.replicas), where)
        _runtime(lambda: rt.clone_session_set(c.session_id, reps, truncate=c.packet_length_bytes,
                                              class_of_service=c.class_of_service))
    else:
        raise invalid(f"packet_replication_engine_entry: no entry given ({kind})")


def _replica_protos(reps: list[Replica]) -> list[P.Replica]:
    return [P.Replica(egress_port=r.port, instance=r.rid) for r in reps]


def read_pre(st: PipelineState, q: P.PacketReplicationEngineEntry) -> Iterator[P.PacketReplicationEngineEntry]:
    pre = st.pipeline.switch.runtime.pre
    kind = q.WhichOneof("type")
    if kind == "multicast_group_entry":
        gid = q.multicast_group_entry.multicast_group_id
        ids = sorted(pre.groups) if gid == 0 else ([gid] if gid in pre.groups else [])
        for g in ids:
            out = P.PacketReplicationEngineEntry()
            out.multicast_group_entry.multicast_group_id = g
            out.multicast_group_entry.replicas.extend(_replica_protos(pre.groups[g]))
            yield out
    elif kind == "clone_session_entry":
        sid = q.clone_session_entry.session_id
        ids = sorted(pre.sessions) if sid == 0 else ([sid] if sid in pre.sessions else [])
        for s in ids:
            sess = pre.sessions[s]
            out = P.PacketReplicationEngineEntry()
            ce = out.clone_session_entry
            ce.session_id, ce.class_of_service = s, sess.class_of_service
            ce.packet_length_bytes = sess.truncate
            ce.replicas.extend(_replica_protos(sess.replicas))
            yield out
    else:
        raise invalid("packet_replication_engine_entry read: say multicast_group_entry or "
                      "clone_session_entry")


__all__ = ["encode_bits", "read_pre", "write_pre"]
