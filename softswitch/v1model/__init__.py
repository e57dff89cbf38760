"""The v1model architecture (BMv2 simple_switch rules) around a compiled program."""
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
                                       "EgressJob",
                                       "IngressJob",
                                       "InstanceType",
                                       "OutputPacket",
                                       "QueueInfo",
                                       "Replica",
                                       "ReplicationEngine",
                                       "V1Switch",
]
