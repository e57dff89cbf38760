"""Congestion control engines computed by the controller from telemetry.

Pure numpy math, no I/O: ``HpccEngine`` (INT-driven HPCC) and ``DcqcnEngine`` /
``CnpGenerator`` (ECN/CNP-driven DCQCN baseline) over flow tables, fed with
``HopSamples`` batches; ``FluidSim`` is a small fluid model to exercise them.
"""
from controller.cc.dcqcn import CnpGenerator, DcqcnEngine, DcqcnParams
from controller.cc.errors import CcError, FlowIndexError, ParameterError, TelemetryError
from controller.cc.feedback import FEEDBACK_DTYPE, decode_feedback, encode_feedback
from controller.cc.hpcc import HpccEngine, HpccParams, RateDecisions
from controller.cc.latency import LatencySummary, LoopLatency
from controller.cc.sim import FluidNetwork, FluidSim
from controller.cc.telemetry import MAX_HOPS, HopSamples, hop_samples_from_records
from controller.cc.wrap import delta_mod, delta_mod_n

__all__ = [
    "CcError", "CnpGenerator", "DcqcnEngine", "DcqcnParams", "FEEDBACK_DTYPE", "FlowIndexError",
    "FluidNetwork", "FluidSim", "HopSamples", "HpccEngine", "HpccParams", "LatencySummary",
    "LoopLatency", "MAX_HOPS", "ParameterError", "RateDecisions", "TelemetryError",
    "decode_feedback", "delta_mod", "delta_mod_n", "encode_feedback", "hop_samples_from_records",
]
