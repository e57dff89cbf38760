"""RoCEv2 traffic: paced RC queue pairs, loss recovery and AI collective workloads.

The part of an RDMA NIC that matters to the network, emulated over UDP sockets:
RDMA WRITE messages segmented into RoCEv2 packets (formats.roce), per-QP token-bucket
pacing changeable at run time (traffic.control), and three reliability modes per QP:
go-back-N, selective repeat with SACK (IRN style), and FEC + selective repeat.

Layers, bottom up:

* :mod:`traffic.cc` (congestion control: DCQCN and HPCC, the registry of algorithms,
  below the controller too), :mod:`traffic.fec`, :mod:`traffic.pacing`,
  :mod:`traffic.emulation` — pure building blocks
* :mod:`traffic.requester`, :mod:`traffic.responder` — QP state machines (no sockets)
* :mod:`traffic.simlink` — both state machines on a simulated link (unit tests)
* :mod:`traffic.endpoint` — sockets, event loop, ICRC check, control socket
* :mod:`traffic.workloads`, :mod:`traffic.runner`, :mod:`traffic.cli` — workloads
"""
from traffic.cc import DcqcnReactionPoint, DcqcnSettings
from traffic.control import ControlCommand, parse_control, query_stats, send_control
from traffic.emulation import parse_loss
from traffic.endpoint import Endpoint, EndpointConfig
from traffic.errors import (
    ConfigError,
    ControlError,
    FecError,
    TrafficError,
    WorkloadError,
)
from traffic.qp_types import QpConfig, Reliability
from traffic.requester import Requester
from traffic.responder import Responder
from traffic.runner import QpParams, RankRunner
from traffic.workloads import Pattern, make_plan, parse_size_dist

__all__ = [
    "ConfigError",
    "ControlCommand",
    "ControlError",
    "DcqcnReactionPoint",
    "DcqcnSettings",
    "Endpoint",
    "EndpointConfig",
    "FecError",
    "Pattern",
    "QpConfig",
    "QpParams",
    "RankRunner",
    "Reliability",
    "Requester",
    "Responder",
    "TrafficError",
    "WorkloadError",
    "make_plan",
    "parse_control",
    "parse_loss",
    "parse_size_dist",
    "query_stats",
    "send_control",
]
