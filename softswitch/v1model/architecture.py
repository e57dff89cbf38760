"""v1model as an architecture plug-in: its package, blocks, drop port, requests and externs.

Everything a back end needs to know about v1model is here (what each extern
does, target-independently, in `v1model_externs`); each back end lowers the same
externs its own way (``softswitch.backends.python.v1model``,
``softswitch.backends.ebpf.v1model``) and each target runs the pipeline that acts on
the requests (``softswitch.targets.python.pipeline``, the eBPF program's own).
`V1Model(drop_port=...)` makes a variant; `V1MODEL` is BMv2's.
"""
from __future__ import annotations

import enum
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from softswitch.architecture import (
    Architecture,
    ExternOp,
    ExternSemantics,
    PacketContext,
    TableConventions,
)
from softswitch.v1model.ports import DROP_PORT


class CloneType(enum.IntEnum):
    """v1model's ``CloneType`` members as the pipeline reads a clone request."""

    I2E = 0
    E2E = 1


class V1PacketContext(PacketContext):
    """The packet context with v1model's requests: what clone, resubmit,
    recirculate, truncate and a failed ``verify_checksum`` leave for the pipeline
    (`V1Switch` reads them after the block), and the block's standard metadata
    (the argument-less ``mark_to_drop()`` writes it)."""

    __slots__ = ("checksum_error", "clone_fl", "clone_session", "clone_type", "recirc_fl",
                 "resubmit_fl", "sm", "truncate")

    def __init__(self) -> None:
        self.sm: Any = None
        super().__init__()

    def reset_requests(self) -> None:
        self.clone_type: CloneType | None = None
        self.clone_session = 0
        self.clone_fl = -1                   # field list index, -1: none preserved
        self.resubmit_fl: int | None = None  # not None: resubmit with this field list
        self.recirc_fl: int | None = None
        self.truncate = 0
        self.checksum_error = 0


def _sem(name: str, op: ExternOp, doc: str, *params: str, **kw: Any) -> tuple[str, ExternSemantics]:
    return name, ExternSemantics(name=name, op=op, doc=doc, params=params, **kw)


def v1model_externs(drop_port: int) -> dict[str, ExternSemantics]:
    """What each v1model extern does, for any backend (names and argument orders
    as v1model.p4 declares them)."""
    E = ExternOp
    clone = ("type", "session")
    return dict([
        _sem("mark_to_drop", E.SET_METADATA, "drop at the end of the block: unicast to the "
             "drop port, no multicast", "standard_metadata",
             writes=(("egress_spec", drop_port), ("mcast_grp", 0))),
        _sem("hash", E.HASH, "result = base + hash(algo, data) mod max (max 0: no modulo)",
             "result", "algo", "base", "data", "max"),
        _sem("random", E.RANDOM, "result = a uniform value in [lo, hi] (lo if hi < lo)",
             "result", "lo", "hi"),
        _sem("verify_checksum", E.CHECKSUM_VERIFY, "if condition and hash(data) != checksum: "
             "standard_metadata.checksum_error = 1", "condition", "data", "checksum", "algo",
             request="checksum_error"),
        _sem("verify_checksum_with_payload", E.CHECKSUM_VERIFY, "verify_checksum over data "
             "and the unparsed payload", "condition", "data", "checksum", "algo",
             request="checksum_error", with_payload=True),
        _sem("update_checksum", E.CHECKSUM_UPDATE, "if condition: checksum = hash(data)",
             "condition", "data", "checksum", "algo"),
        _sem("update_checksum_with_payload", E.CHECKSUM_UPDATE, "update_checksum over data "
             "and the unparsed payload", "condition", "data", "checksum", "algo", with_payload=True),
        _sem("clone", E.REQUEST, "copy the packet to a clone session after the block "
             "(I2E: as it entered ingress; E2E: as egress leaves it)", *clone, request="clone"),
        _sem("clone3", E.REQUEST, "clone (legacy form: its data is not preserved)",
             *clone, "data", request="clone"),
        _sem("clone_preserving_field_list", E.REQUEST, "clone, the clone keeping the "
             "metadata fields of @field_list(index)", *clone, "index", request="clone"),
        _sem("resubmit", E.REQUEST, "run ingress again on the original packet (legacy form: "
             "no metadata preserved)", "data", request="resubmit"),
        _sem("resubmit_preserving_field_list", E.REQUEST, "resubmit keeping the metadata "
             "fields of @field_list(index)", "index", request="resubmit"),
        _sem("recirculate", E.REQUEST, "send the deparsed packet into ingress again (legacy "
             "form: no metadata preserved)", "data", request="recirculate"),
        _sem("recirculate_preserving_field_list", E.REQUEST, "recirculate keeping the "
             "metadata fields of @field_list(index)", "index", request="recirculate"),
        _sem("truncate", E.REQUEST, "send at most length bytes of the packet", "length",
             request="truncate"),
        _sem("assert", E.ASSERT, "drop the packet when check is false", "check"),
        _sem("assume", E.ASSERT, "drop the packet when check is false", "check"),
        _sem("log_msg", E.LOG, "a message ({} filled from data) in the packet trace",
             "msg", "data"),
        _sem("digest", E.DIGEST, "queue data for the control plane (a digest list)",
             "receiver", "data"),
        _sem("register", E.INSTANCE, "an array of size values", "size", state="register"),
        _sem("register.read", E.STATE_READ, "result = register[index]", "result", "index",
             state="register"),
        _sem("register.write", E.STATE_WRITE, "register[index] = value", "index", "value",
             state="register"),
        _sem("counter", E.INSTANCE, "an array of size counters", "size", "type", state="counter"),
        _sem("counter.count", E.COUNT, "count the packet at index", "index", state="counter"),
        _sem("direct_counter", E.INSTANCE, "a counter per entry of one table", "type",
             state="direct_counter"),
        _sem("direct_counter.count", E.DIRECT_COUNT, "nothing: the table counts its hit "
             "entry", state="direct_counter"),
        _sem("meter", E.INSTANCE, "an array of size two-rate three-colour meters", "size",
             "type", state="meter"),
        _sem("meter.execute_meter", E.METER, "result = the packet's colour at index",
             "index", "result", state="meter"),
        _sem("direct_meter", E.INSTANCE, "a meter per entry of one table", "type",
             state="direct_meter"),
        _sem("direct_meter.read", E.DIRECT_METER_READ, "result = the colour the table's hit "
             "entry gave the packet", "result", state="direct_meter"),
        _sem("action_profile", E.INSTANCE, "members shared by indirect tables", "size",
             state="action_profile"),
        _sem("action_selector", E.INSTANCE, "an action profile whose groups pick a member "
             "by hashing the selector keys", "algorithm", "size", "outputWidth",
             state="action_profile"),
    ])


class V1Model(Architecture):
    """BMv2 simple_switch's v1model: ``V1Switch(p, vr, ig, eg, ck, dep)``."""

    name = "v1model"
    package = "V1Switch"
    block_params = ("p", "vr", "ig", "eg", "ck", "dep")
    context_class = V1PacketContext
    # the HashAlgorithm members whose CRC parameters BMv2 lets the control plane set
    custom_hashes: Mapping[str, int] = MappingProxyType({"crc16_custom": 16, "crc32_custom": 32})
    tables = TableConventions(direct_counters="counters", direct_meters="meters",
                              implementation="implementation", selector_match_kind="selector")

    def __init__(self, *, drop_port: int = DROP_PORT) -> None:
        self.drop_port = drop_port
        super().__init__(externs=v1model_externs(drop_port))


V1MODEL = V1Model()
