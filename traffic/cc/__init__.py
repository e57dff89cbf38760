"""Congestion control: each algorithm's math once, for the senders and the controller.

This package sits below both users (``traffic``'s QPs and ``controller.cc``'s loop):

* :mod:`traffic.cc.base`: the interfaces, :class:`SenderCc` (what one QP runs, per
  ACK / CNP / byte / tick) and :class:`RateEngine` (what the controller runs over its
  flow table);
* :mod:`traffic.cc.registry`: the algorithms by name (``none``, ``dcqcn``, ``hpcc``,
  ``hpcc-sender``), read by the spec, the CLIs, the test bed and the requester;
* :mod:`traffic.cc.hpcc_math`: HPCC's formulas (per-hop u, EWMA, steps, bounds) for
  floats and numpy arrays alike; :mod:`traffic.cc.hpcc`: HPCC per ACK in a QP (the
  reference: it matches the authors' ns-3 model); the vectorised engine that uses the
  same formulas is ``controller.cc.hpcc``;
* :mod:`traffic.cc.dcqcn_engine`: DCQCN's reaction point vectorised over flows (the
  controller's fluid model runs it too) and its notification point;
  :mod:`traffic.cc.dcqcn`: one QP's reaction point at emulation scale.

The reference classes are importable from here: ``from traffic.cc import HpccSettings,
HpccState, EchoHop, DcqcnSettings, DcqcnReactionPoint, DcqcnEngine, DcqcnParams``.
"""
from formats.int_echo import EchoHop
from traffic.cc.base import RateEngine, SenderCc, SenderCcBase
from traffic.cc.dcqcn import TIME_SCALE, DcqcnReactionPoint, DcqcnSender, DcqcnSettings
from traffic.cc.dcqcn_engine import (
    CnpGenerator,
    DcqcnEngine,
    DcqcnFlowIndexError,
    DcqcnParameterError,
    DcqcnParams,
)
from traffic.cc.hpcc import HpccSender, HpccSettings, HpccState
from traffic.cc.registry import CcAlgorithm, get, names, register, unregister

__all__ = [
    "TIME_SCALE",
    "CcAlgorithm",
    "CnpGenerator",
    "DcqcnEngine",
    "DcqcnFlowIndexError",
    "DcqcnParameterError",
    "DcqcnParams",
    "DcqcnReactionPoint",
    "DcqcnSender",
    "DcqcnSettings",
    "EchoHop",
    "HpccSender",
    "HpccSettings",
    "HpccState",
    "RateEngine",
    "SenderCc",
    "SenderCcBase",
    "get",
    "names",
    "register",
    "unregister",
]
