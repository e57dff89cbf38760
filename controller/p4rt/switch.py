"""A managed switch: one client, one pipeline, one desired state, kept in sync.

Why here and not in the client: the client speaks P4Runtime; this layer knows what
the switch *should* hold and restores it — at start, and again whenever the client
reconnects (a restarted switch comes back empty and is refilled).
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from p4.v1 import p4runtime_pb2 as P

from .client import Backoff, SwitchClient, TlsOptions
from .entries import DesiredState, clone_session_to_proto, entry_to_proto, format_entry
from .errors import P4rtError
from .pipeline import PipelineConfig
from .reconcile import Plan, plan_clone_sessions, plan_default_entries, plan_table_entries
from .schema import Schema

LOG = logging.getLogger("controller.p4rt")


@dataclass(slots=True, kw_only=True)
class SyncReport:
    """What one sync did on one switch."""

    switch: str
    pipeline_pushed: bool = False
    inserted: int = 0
    modified: int = 0
    deleted: int = 0

    def summary(self) -> str:
        push = "pipeline pushed" if self.pipeline_pushed else "pipeline kept"
        return f"{push}; {self.inserted} inserted, {self.modified} modified, {self.deleted} deleted"


def describe_update(schema: Schema, u: P.Update) -> str:
    """'INSERT SwitchIngress.ipv4_lpm dst_addr=... -> ...' for error messages."""
    kind = P.Update.Type.Name(u.type)
    which = u.entity.WhichOneof("entity")
    if which == "table_entry":
        return f"{kind} {format_entry(schema, u.entity.table_entry)}"
    if which == "packet_replication_engine_entry":
        c = u.entity.packet_replication_engine_entry.clone_session_entry
        return f"{kind} clone session {c.session_id} -> ports {[r.egress_port for r in c.replicas]}"
    return f"{kind} {which}"


@dataclass(slots=True, kw_only=True)
class ManagedSwitch:
    """Name, address, device id, the pipeline to run and the entries to hold."""

    name: str
    address: str
    device_id: int
    pipeline: PipelineConfig
    desired: DesiredState = field(default_factory=DesiredState)
    election_id: int = 1
    timeout_s: float = 5.0
    backoff: Backoff = field(default_factory=Backoff)
    tls: TlsOptions | None = None
    client: SwitchClient | None = None
    on_synced: Callable[[ManagedSwitch, SyncReport], None] | None = None
    last_sync: SyncReport | None = None
    syncs: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _schema: tuple[PipelineConfig, Schema] | None = None   # (pipeline, its index), built once

    @property
    def schema(self) -> Schema:
        """The pipeline's P4Info index, built once per pipeline (the link poller and
        every reroute ask for it each round; from_p4info parses the whole P4Info)."""
        if self._schema is None or self._schema[0] is not self.pipeline:
            self._schema = (self.pipeline, Schema.from_p4info(self.pipeline.p4info))
        return self._schema[1]

    def connect(self) -> None:
        self.client = SwitchClient(name=self.name, address=self.address, device_id=self.device_id,
                                   election_id=self.election_id, timeout_s=self.timeout_s,
                                   backoff=self.backoff, on_reconnect=self._restore, tls=self.tls)
        self.client.connect()

    def _restore(self, _client: SwitchClient) -> None:
        self.sync()

    def reclaim(self) -> SyncReport | None:
        """If the switch has no primary (another controller held it and left), become
        primary again and sync, which also removes what the other one wrote.  None when
        nothing was done (still primary, or another client is primary)."""
        if self.client is None or self.client.role_state != "no-primary":
            return None
        if not self.client.reclaim_primary():
            return None
        LOG.warning("switch %s: primary again (election id %d); re-syncing", self.name, self.client.election_id)
        return self.sync()

    def close(self) -> None:
        if self.client is not None:
            self.client.close()

    def sync(self) -> SyncReport:
        """Push the pipeline if the switch runs another one (or none), then write the
        difference between the switch's entries and the desired ones."""
        if self.client is None:
            raise P4rtError(f"switch {self.name}: not connected")
        with self._lock:
            report = SyncReport(switch=self.name)
            c = self.client
            _info, cookie = c.get_pipeline()
            if _info is None or cookie != self.pipeline.cookie:
                LOG.info("switch %s: pushing pipeline %s", self.name, self.pipeline.source)
                c.set_pipeline(self.pipeline.p4info_bytes, self.pipeline.device_config,
                               cookie=self.pipeline.cookie)
                report.pipeline_pushed = True
            schema = Schema.from_p4info(self.pipeline.p4info)
            protos = [entry_to_proto(schema, e) for e in self.desired.entries]
            normal = [te for te in protos if not te.is_default_action]
            defaults = [te for te in protos if te.is_default_action]
            plan = plan_table_entries(normal, c.read_table_entries())
            current_defaults = {te.table_id: c.read_default_entry(te.table_id) for te in defaults}
            dplan = plan_default_entries(defaults, current_defaults)
            cplan = plan_clone_sessions([clone_session_to_proto(s) for s in self.desired.clone_sessions],
                                        c.read_clone_sessions())
            self._apply(schema, plan, dplan, cplan)
            report.inserted = len(plan.inserts) + len(cplan.inserts)
            report.modified = len(plan.modifies) + len(dplan.modifies) + len(cplan.modifies)
            report.deleted = len(plan.deletes) + len(cplan.deletes)
            self.last_sync = report
            self.syncs += 1
            LOG.info("switch %s: synced: %s", self.name, report.summary())
        if self.on_synced is not None:
            self.on_synced(self, report)
        return report

    def update(self, desired: DesiredState) -> SyncReport:
        """Make ``desired`` the switch's entries by writing only their difference from
        the entries it holds now (the last synced ``desired``): no pipeline check and no
        read-back, so a reroute is one Write of modifies, not a full `sync` (which reads
        the pipeline and every table back: seconds on a loaded switch).  If that Write
        fails the switch is fully synced instead."""
        if self.client is None:
            self.desired = desired
            raise P4rtError(f"switch {self.name}: not connected")
        with self._lock:
            schema = self.schema
            old = [entry_to_proto(schema, e) for e in self.desired.entries]
            new = [entry_to_proto(schema, e) for e in desired.entries]
            plan = plan_table_entries(new, old)
            dplan = plan_default_entries([te for te in new if te.is_default_action],
                                         {te.table_id: te for te in old if te.is_default_action})
            self.desired = desired
            try:
                self._apply(schema, plan, dplan)
            except P4rtError as exc:
                LOG.warning("switch %s: writing the difference failed (%s); syncing", self.name, exc)
                ok = False
            else:
                ok = True
                report = SyncReport(switch=self.name, inserted=len(plan.inserts),
                                    modified=len(plan.modifies) + len(dplan.modifies),
                                    deleted=len(plan.deletes))
        return report if ok else self.sync()

    def _apply(self, schema: Schema, *plans: Plan) -> None:
        assert self.client is not None
        describe = lambda u: describe_update(schema, u)
        # deletes of every plan first (free space), then modifies, then inserts
        for part in ("deletes", "modifies", "inserts"):
            updates = [u for p in plans for u in getattr(p, part)]
            self.client.write(updates, describe=describe)
