"""The v1model architecture: what the compiler and every back end know of it
(`V1MODEL`: package, blocks, drop port, extern semantics), its port numbers, the
replication engine of its multicast groups and clone sessions, and the jobs its
pipeline stages hand each other.

The pipeline that runs a program compiled for it is a target's
(``softswitch.targets.python.pipeline.V1Switch``; the eBPF target's is in the kernel).
The names below load on first use, so that reading v1model's port numbers
(`softswitch.v1model.ports`, which imports nothing) does not load the compiler.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from softswitch.v1model.architecture import V1MODEL, CloneType, V1Model, V1PacketContext
    from softswitch.v1model.jobs import EgressJob, IngressJob, InstanceType, OutputPacket, QueueInfo
    from softswitch.v1model.ports import DROP_PORT
    from softswitch.v1model.pre import Replica, ReplicationEngine

_HOME = {
    "DROP_PORT": "ports",
    "V1MODEL": "architecture", "CloneType": "architecture", "V1Model": "architecture",
    "V1PacketContext": "architecture",
    "Replica": "pre", "ReplicationEngine": "pre",
    "EgressJob": "jobs", "IngressJob": "jobs", "InstanceType": "jobs",
    "OutputPacket": "jobs", "QueueInfo": "jobs",
}

__all__ = ["DROP_PORT", "V1MODEL", "CloneType", "EgressJob", "IngressJob", "InstanceType",
           "OutputPacket", "QueueInfo", "Replica", "ReplicationEngine", "V1Model",
           "V1PacketContext"]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
