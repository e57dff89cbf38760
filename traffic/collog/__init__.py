"""Collective logs: one JSON-lines file per rank, and readers for NCCL and PyTorch logs.

Why: fault localisation joins what the collective saw (which step of which rank was
slow, how many retransmissions, when rates changed) with the network's telemetry.
The test bed's ranks write these logs themselves (``traffic.collog.writer``); logs that
training jobs already have are turned into the same records (``nccl`` for
``NCCL_DEBUG=INFO`` lines, ``flight_recorder`` for PyTorch's NCCL flight-recorder
dumps), so the diagnosis works outside the test bed too.  FORMAT.md is the format.
"""
from traffic.collog.records import CollogError, CollRecord, read_log, read_logs
from traffic.collog.writer import CollectiveLogWriter

__all__ = ["CollRecord", "CollectiveLogWriter", "CollogError", "read_log", "read_logs"]
