"""What moves between the stages of a v1model pipeline: the jobs a traffic manager
queues between ingress and egress, what it reports about a packet's stay in the
queue, and the packets that leave.

Apart from the pipeline that runs them (``softswitch.targets.python.pipeline``):
the daemon's traffic manager (``softswitch.switchd.tm``) and every target's
packet output speak these terms.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

__all__ = ["EgressJob", "IngressJob", "InstanceType", "OutputPacket", "QueueInfo"]


class InstanceType(enum.IntEnum):
    """standard_metadata.instance_type values of BMv2 simple_switch."""

    NORMAL = 0
    INGRESS_CLONE = 1
    EGRESS_CLONE = 2
    COALESCED = 3
    RECIRC = 4
    REPLICATION = 5
    RESUBMIT = 6


@dataclass(slots=True, kw_only=True)
class IngressJob:
    port: int
    data: bytes
    instance_type: int = 0
    preserved: dict[str, Any] | None = None
    passes: int = 0


@dataclass(slots=True, kw_only=True)
class EgressJob:
    """A packet between ingress and egress (what a traffic manager queues)."""

    hdr: Any
    meta: Any
    sm: Any
    payload: bytes
    egress_port: int
    instance_type: int = 0
    truncate: int = 0
    passes: int = 0
    length: int = 0


@dataclass(slots=True, frozen=True, kw_only=True)
class QueueInfo:
    """What a traffic manager reports about one packet's stay in its egress queue."""

    enq_qdepth: int = 0        # packets queued when it arrived
    deq_qdepth: int = 0        # packets queued when it left
    deq_timedelta_us: int = 0  # time spent queued
    enq_timestamp_us: int | None = None
    # when it starts to leave on a paced port's schedule (None: now, when egress runs)
    departure_us: int | None = None


@dataclass(slots=True, frozen=True)
class OutputPacket:
    port: int
    data: bytes
    instance_type: int = 0
