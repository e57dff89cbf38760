"""The v1model architecture: its plug-in for the compiler (`V1MODEL`) and the
BMv2 simple_switch pipeline that runs what it compiled (`V1Switch`)."""
from softswitch.v1model.architecture import DROP_PORT, V1MODEL, CloneType, V1Model, V1PacketContext
from softswitch.v1model.pre import Replica, ReplicationEngine
from softswitch.v1model.switch import (
                                       EgressJob,
                                       IngressJob,
                                       InstanceType,
                                       OutputPacket,
                                       QueueInfo,
                                       V1Switch,
)

__all__ = [
                                       "DROP_PORT",
                                       "V1MODEL",
                                       "CloneType",
                                       "EgressJob",
                                       "IngressJob",
                                       "InstanceType",
                                       "OutputPacket",
                                       "QueueInfo",
                                       "Replica",
                                       "ReplicationEngine",
                                       "V1Model",
                                       "V1PacketContext",
                                       "V1Switch",
]
