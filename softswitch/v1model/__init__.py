"""The v1model architecture: its plug-in for the compiler (`V1MODEL`) and the
BMv2 simple_switch pipeline that runs what it compiled (`V1Switch`).

The names below load on first use, so that reading v1model's port numbers
(`softswitch.v1model.ports`, which imports nothing) does not load the compiler.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from softswitch.v1model.architecture import V1MODEL, CloneType, V1Model, V1PacketContext
    from softswitch.v1model.ports import DROP_PORT
    from softswitch.v1model.pre import Replica, ReplicationEngine
    from softswitch.v1model.switch import (
        EgressJob,
        IngressJob,
        InstanceType,
        OutputPacket,
        QueueInfo,
        V1Switch,
    )

_HOME = {
    "DROP_PORT": "ports",
    "V1MODEL": "architecture", "CloneType": "architecture", "V1Model": "architecture",
    "V1PacketContext": "architecture",
    "Replica": "pre", "ReplicationEngine": "pre",
    "EgressJob": "switch", "IngressJob": "switch", "InstanceType": "switch",
    "OutputPacket": "switch", "QueueInfo": "switch", "V1Switch": "switch",
}

__all__ = ["DROP_PORT", "V1MODEL", "CloneType", "EgressJob", "IngressJob", "InstanceType",
           "OutputPacket", "QueueInfo", "Replica", "ReplicationEngine", "V1Model",
           "V1PacketContext", "V1Switch"]


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
