"""ctypes view of the native HPCC (``cc_hpcc.h``): the struct layouts and a thin QP wrapper.

Why here: the engine's own wrapper builds ``tn_hpcc_params`` from the Python settings
with :func:`hpcc_params`, and the differential tests drive :class:`NativeHpcc` ACK by
ACK against the Python reference; both need the same layouts, declared once.
"""
from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from functools import cache
from typing import Protocol

from traffic.errors import ConfigError
from traffic.native import load_library

__all__ = ["MAX_HOPS", "HpccSettingsLike", "IntHop", "NativeHpcc", "TnHpcc", "TnHpccParams",
           "hpcc_params"]

MAX_HOPS = 8  # TN_HPCC_MAX_HOPS


class IntHop(ctypes.Structure):
    """``struct tn_int_hop``: one echoed hop record, fields as on the wire."""

    _fields_ = [("node_id", ctypes.c_uint32), ("egress_ts_us", ctypes.c_uint32),
                ("tx_bytes", ctypes.c_uint32), ("queue_bytes", ctypes.c_uint32),
                ("line_rate_mbps", ctypes.c_uint32)]


class TnHpccParams(ctypes.Structure):
    _fields_ = [("eta", ctypes.c_double), ("max_stage", ctypes.c_uint32),
                ("w_ai_fraction", ctypes.c_double), ("min_rate_fraction", ctypes.c_double),
                ("base_rtt_s", ctypes.c_double), ("min_base_rtt_s", ctypes.c_double),
                ("multi_rate", ctypes.c_int), ("fast_react", ctypes.c_int),
                ("update_once_per_t", ctypes.c_int)]


class _HopState(ctypes.Structure):
    _fields_ = [("u", ctypes.c_double), ("rc", ctypes.c_double), ("inc_stage", ctypes.c_uint32)]


class TnHpcc(ctypes.Structure):
    """``struct tn_hpcc``: one QP's state."""

    _fields_ = [("p", TnHpccParams), ("max_rate_bps", ctypes.c_double),
                ("rate_bps", ctypes.c_double), ("ref_rate_bps", ctypes.c_double),
                ("u", ctypes.c_double), ("inc_stage", ctypes.c_uint32),
                ("have_seq", ctypes.c_int), ("last_update_seq", ctypes.c_int64),
                ("last_update_s", ctypes.c_double), ("updates", ctypes.c_uint64),
                ("fast_reacts", ctypes.c_uint64), ("skipped_hops", ctypes.c_uint64),
                ("path_changes", ctypes.c_uint64), ("n_hops", ctypes.c_uint32),
                ("hops", IntHop * MAX_HOPS), ("hop", _HopState * MAX_HOPS)]


class _EchoHopLike(Protocol):
    """An echoed hop record (``formats.int_echo.EchoHop``)."""

    @property
    def node_id(self) -> int: ...
    @property
    def egress_ts(self) -> int: ...
    @property
    def tx_bytes(self) -> int: ...
    @property
    def queue_bytes(self) -> int: ...
    @property
    def line_rate(self) -> int: ...


class HpccSettingsLike(Protocol):
    """What :func:`hpcc_params` reads (the Python reference's ``HpccSettings``)."""

    @property
    def eta(self) -> float: ...
    @property
    def max_stage(self) -> int: ...
    @property
    def w_ai_fraction(self) -> float: ...
    @property
    def min_rate_fraction(self) -> float: ...
    @property
    def base_rtt_s(self) -> float | None: ...
    @property
    def min_base_rtt_s(self) -> float: ...
    @property
    def multi_rate(self) -> bool: ...
    @property
    def fast_react(self) -> bool: ...
    @property
    def update_once_per_t(self) -> bool: ...


@cache
def _lib() -> ctypes.CDLL:
    """The library with this header's argument and result types declared."""
    lib = load_library()
    lib.tn_hpcc_init.argtypes = [ctypes.POINTER(TnHpcc), ctypes.POINTER(TnHpccParams),
                                 ctypes.c_double]
    lib.tn_hpcc_init.restype = ctypes.c_int
    lib.tn_hpcc_on_ack.argtypes = [ctypes.POINTER(TnHpcc), ctypes.POINTER(IntHop),
                                   ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64,
                                   ctypes.c_double, ctypes.c_double]
    lib.tn_hpcc_on_ack.restype = ctypes.c_int
    lib.tn_hpcc_base_rtt.argtypes = [ctypes.POINTER(TnHpccParams), ctypes.c_double]
    lib.tn_hpcc_base_rtt.restype = ctypes.c_double
    lib.tn_hpcc_window_bytes.argtypes = [ctypes.POINTER(TnHpcc), ctypes.c_double]
    lib.tn_hpcc_window_bytes.restype = ctypes.c_double
    return lib


def hpcc_params(settings: HpccSettingsLike) -> TnHpccParams:
    """``tn_hpcc_params`` from the Python settings (``base_rtt_s`` None becomes 0)."""
    return TnHpccParams(eta=settings.eta, max_stage=settings.max_stage,
                        w_ai_fraction=settings.w_ai_fraction,
                        min_rate_fraction=settings.min_rate_fraction,
                        base_rtt_s=settings.base_rtt_s or 0.0,
                        min_base_rtt_s=settings.min_base_rtt_s,
                        multi_rate=int(settings.multi_rate), fast_react=int(settings.fast_react),
                        update_once_per_t=int(settings.update_once_per_t))


class NativeHpcc:
    """One QP's HPCC state in C, with the Python reference's ``on_ack`` signature."""

    def __init__(self, max_rate_bps: float, settings: HpccSettingsLike) -> None:
        self._lib = _lib()
        self.params = hpcc_params(settings)
        self.state = TnHpcc()
        if self._lib.tn_hpcc_init(ctypes.byref(self.state), ctypes.byref(self.params),
                                  max_rate_bps) != 0:
            raise ConfigError(f"native HPCC: settings {settings!r} or line rate "
                              f"{max_rate_bps!r} bit/s out of range")
        self._hops = (IntHop * MAX_HOPS)()

    def on_ack(self, hops: Sequence[_EchoHopLike], *, ack_seq: int, next_seq: int,
               base_rtt_s: float, now_s: float | None = None) -> bool:
        """One ACK; True when the rate changed (as ``HpccState.on_ack``)."""
        if len(hops) > MAX_HOPS:
            raise ConfigError(f"HPCC: {len(hops)} hops, at most {MAX_HOPS}")
        for i, h in enumerate(hops):
            self._hops[i] = IntHop(h.node_id & 0xFFFFFFFF, h.egress_ts & 0xFFFFFFFF,
                                   h.tx_bytes & 0xFFFFFFFF, h.queue_bytes & 0xFFFFFFFF,
                                   h.line_rate & 0xFFFFFFFF)
        rc = self._lib.tn_hpcc_on_ack(ctypes.byref(self.state), self._hops, len(hops),
                                      ack_seq, next_seq, base_rtt_s,
                                      math.nan if now_s is None else now_s)
        return rc == 1

    def base_rtt(self, measured_s: float | None) -> float:
        return float(self._lib.tn_hpcc_base_rtt(ctypes.byref(self.params),
                                                math.nan if measured_s is None else measured_s))

    def window_bytes(self, base_rtt_s: float) -> float:
        return float(self._lib.tn_hpcc_window_bytes(ctypes.byref(self.state), base_rtt_s))

    @property
    def rate_bps(self) -> float:
        return float(self.state.rate_bps)

    @property
    def ref_rate_bps(self) -> float:
        return float(self.state.ref_rate_bps)
