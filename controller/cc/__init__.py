"""Congestion control engines computed by the controller from telemetry.

Pure numpy math, no I/O: ``HpccEngine`` (INT-driven HPCC) and ``DcqcnEngine`` /
``CnpGenerator`` (ECN/CNP-driven DCQCN baseline, from :mod:`traffic.cc.dcqcn_engine`, which the
senders of ``traffic`` run too) over flow tables, fed with
``HopSamples`` batches; ``FluidSim`` is a small fluid model to exercise them.
``encode_feedback`` packs rate/FEC feedback records and ``FeedbackSender`` (the
only I/O here) sends them to the host agents over UDP; ``controller.cc.loop.HpccLoop``
is a collector listener tying telemetry, HPCC and feedback together (its
``CommitGate`` commits HPCC's reference rate only on telemetry sent after the agent
confirmed the last committed rate applied).
"""
from controller.cc.errors import CcError, FlowIndexError, ParameterError, TelemetryError
from controller.cc.feedback import (
    FEEDBACK_DTYPE,
    FLAG_DCQCN,
    FLAG_PATH_CHANGED,
    FLAG_RETRANSMIT,
    decode_feedback,
    encode_feedback,
    fec_to_wire,
)
from controller.cc.gate import CommitGate, GateParams, GateStats, psn_at_or_after
from controller.cc.hpcc import HpccEngine, HpccParams, HpccStats, RateDecisions
from controller.cc.latency import LatencySummary, LoopLatency
from controller.cc.loop import FeedbackTarget, HpccLoop, LoopStats
from controller.cc.sender import Confirmations, FeedbackSender, SenderStats
from controller.cc.sim import FluidNetwork, FluidSim
from controller.cc.telemetry import (
    MAX_HOPS,
    V1MODEL_TS_MODULUS_NS,
    HopSamples,
    hop_samples_from_records,
)
from controller.cc.wrap import delta_mod, delta_mod_n
from traffic.cc.dcqcn_engine import (
    CnpGenerator,
    DcqcnEngine,
    DcqcnFlowIndexError,
    DcqcnParameterError,
    DcqcnParams,
)

__all__ = [
    "FEEDBACK_DTYPE",
    "FLAG_DCQCN",
    "FLAG_PATH_CHANGED",
    "FLAG_RETRANSMIT",
    "MAX_HOPS",
    "V1MODEL_TS_MODULUS_NS",
    "CcError",
    "CnpGenerator",
    "CommitGate",
    "Confirmations",
    "DcqcnEngine",
    "DcqcnFlowIndexError",
    "DcqcnParameterError",
    "DcqcnParams",
    "FeedbackSender",
    "FeedbackTarget",
    "FlowIndexError",
    "FluidNetwork",
    "FluidSim",
    "GateParams",
    "GateStats",
    "HopSamples",
    "HpccEngine",
    "HpccLoop",
    "HpccParams",
    "HpccStats",
    "LatencySummary",
    "LoopLatency",
    "LoopStats",
    "ParameterError",
    "RateDecisions",
    "SenderStats",
    "TelemetryError",
    "decode_feedback",
    "delta_mod",
    "delta_mod_n",
    "encode_feedback",
    "fec_to_wire",
    "hop_samples_from_records",
    "psn_at_or_after",
]
