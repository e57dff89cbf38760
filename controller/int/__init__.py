"""Telemetry collector: Telemetry Report v2.0 and host-agent batches -> hop/flow state.

Public API:

* ``Collector(CollectorConfig(...), listeners=[fn])`` — UDP servers (reports on
  32766, agent batches on 32767 by default), ``start()/stop()`` or ``with``;
  ``feed_reports(datagrams)`` / ``feed_agent_batches(datagrams)`` without sockets;
  ``hop_snapshot()``, ``flow_snapshot()``, ``stats()``.
* ``ReportDecoder`` / ``HostBatchDecoder`` — vectorised decoders into
  ``DecodedBatch(samples=REPORT_DTYPE array, hops=HOP_DTYPE array)``.
* ``HopTable`` / ``FlowTable`` — bounded state with ring buffers.
* ``controller.int.feed.hop_samples(batch, flow_slots)`` — input for controller.cc.
* ``controller.int.synth`` — synthetic reports for tests and benchmarks.
"""
from controller.int.collector import Collector, CollectorConfig, CollectorStats
from controller.int.decode import ReportDecoder
from controller.int.errors import CollectorError, ConfigError, Malformed
from controller.int.host import HostBatchDecoder
from controller.int.records import HOP_DTYPE, REPORT_DTYPE, DecodedBatch
from controller.int.state import FlowSnapshot, FlowTable, HopSnapshot, HopTable

__all__ = [
    "HOP_DTYPE",
    "REPORT_DTYPE",
    "Collector",
    "CollectorConfig",
    "CollectorError",
    "CollectorStats",
    "ConfigError",
    "DecodedBatch",
    "FlowSnapshot",
    "FlowTable",
    "HopSnapshot",
    "HopTable",
    "HostBatchDecoder",
    "Malformed",
    "ReportDecoder",
]
