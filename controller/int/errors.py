"""Exceptions of the telemetry collector (one hierarchy for controller.int).

Malformed telemetry never raises: it is counted by reason (``Malformed``) and
dropped.  These exceptions are for programming and configuration errors only.
"""
from __future__ import annotations

import enum


class CollectorError(Exception):
    """Base of every error raised by controller.int."""


class ConfigError(CollectorError):
    """A collector or table parameter is out of range (message names it and the value)."""


class Malformed(enum.Enum):
    """Why a telemetry report or agent batch was dropped (counter names)."""

    SHORT = "short"
    UNALIGNED = "unaligned"
    BAD_VERSION = "bad_version"
    REPORT_LENGTH = "report_length"
    UNSUPPORTED_REPORT_TYPE = "unsupported_report_type"
    UNSUPPORTED_INNER_TYPE = "unsupported_inner_type"
    MD_LENGTH = "md_length"
    INNER_TRUNCATED = "inner_truncated"
    BAD_IPV4 = "bad_ipv4"
    NOT_UDP = "not_udp"
    NOT_INT_MD = "not_int_md"
    BAD_SHIM = "bad_shim"
    BAD_MD_VERSION = "bad_md_version"
    HOP_ML_MISMATCH = "hop_ml_mismatch"
    BATCH_MAGIC = "batch_magic"
    BATCH_VERSION = "batch_version"
    BATCH_RECORD_SIZE = "batch_record_size"
    BATCH_LENGTH = "batch_length"
    RECORD_HOP_COUNT = "record_hop_count"
