"""P4Runtime client for many switches: typed P4Info schema, match codecs, entries,
idempotent reconciliation, one StreamChannel per switch with arbitration and reconnect.

Layers (each uses only those above it)::

    errors -> schema -> codec -> entries -> reconcile      (pure, no I/O)
    pipeline (P4Info + device config per target)
    client   (one switch: gRPC channel + stream thread)
    switch   (client + pipeline + desired state: sync / restore on reconnect)
    fleet    (many switches in parallel, progress per switch)
"""
from .client import Backoff, Digest, SwitchClient, TlsOptions
from .codec import (
    decode_bits,
    decode_match,
    encode_bits,
    encode_match,
    format_match,
    format_value,
    normalize_match,
    parse_value,
)
from .entries import (
    CloneSession,
    DesiredState,
    TableEntry,
    entry_from_proto,
    entry_key,
    entry_to_proto,
    format_entry,
)
from .errors import (
    ArbitrationError,
    CodecError,
    ConnectError,
    P4rtError,
    PipelineError,
    RpcError,
    SchemaError,
    UpdateFailure,
    WriteError,
)
from .fleet import Fleet, FleetResult, Phase, Progress
from .p4c import compile_bmv2, compile_bmv2_cached
from .packetio import PacketIn, decode_packet_in, encode_packet_out
from .pipeline import PipelineConfig, Target, load_pipeline, read_p4info, softswitch_device_config
from .reconcile import Plan, plan_clone_sessions, plan_default_entries, plan_table_entries
from .schema import MatchKind, Schema
from .switch import ManagedSwitch, SyncReport, describe_update

__all__ = [
    "ArbitrationError",
    "Backoff",
    "CloneSession",
    "CodecError",
    "ConnectError",
    "DesiredState",
    "Digest",
    "Fleet",
    "FleetResult",
    "ManagedSwitch",
    "MatchKind",
    "P4rtError",
    "PacketIn",
    "Phase",
    "PipelineConfig",
    "PipelineError",
    "Plan",
    "Progress",
    "RpcError",
    "Schema",
    "SchemaError",
    "SwitchClient",
    "SyncReport",
    "TableEntry",
    "Target",
    "TlsOptions",
    "UpdateFailure",
    "WriteError",
    "compile_bmv2",
    "compile_bmv2_cached",
    "decode_bits",
    "decode_match",
    "decode_packet_in",
    "describe_update",
    "encode_bits",
    "encode_match",
    "encode_packet_out",
    "entry_from_proto",
    "entry_key",
    "entry_to_proto",
    "format_entry",
    "format_match",
    "format_value",
    "load_pipeline",
    "normalize_match",
    "parse_value",
    "plan_clone_sessions",
    "plan_default_entries",
    "plan_table_entries",
    "read_p4info",
    "softswitch_device_config",
]
