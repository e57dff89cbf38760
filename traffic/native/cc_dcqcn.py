"""ctypes view of the native DCQCN reaction point (``cc_dcqcn.h``) and a thin QP wrapper.

Why here: the engine's wrapper builds ``tn_dcqcn_params`` from the Python settings with
:func:`dcqcn_params`, and the differential tests drive :class:`NativeDcqcn` event by
event against the Python reference; both need the same layouts, declared once.
"""
from __future__ import annotations

import ctypes
from functools import cache
from typing import Protocol

from traffic.errors import ConfigError
from traffic.native import load_library

__all__ = ["DcqcnSettingsLike", "NativeDcqcn", "TnDcqcn", "TnDcqcnParams", "dcqcn_params"]


class TnDcqcnParams(ctypes.Structure):
    _fields_ = [("timer_s", ctypes.c_double), ("alpha_interval_s", ctypes.c_double),
                ("cnp_interval_s", ctypes.c_double), ("decrease_interval_s", ctypes.c_double),
                ("byte_counter_s", ctypes.c_double), ("g", ctypes.c_double),
                ("fast_recovery_stages", ctypes.c_uint32),
                ("rate_ai_fraction", ctypes.c_double), ("rate_hai_fraction", ctypes.c_double),
                ("min_rate_fraction", ctypes.c_double), ("initial_alpha", ctypes.c_double)]


class TnDcqcn(ctypes.Structure):
    """``struct tn_dcqcn``: one QP's reaction point."""

    _fields_ = [("p", TnDcqcnParams), ("line_rate_bps", ctypes.c_double),
                ("byte_counter_bytes", ctypes.c_int64),
                ("rate_bps", ctypes.c_double), ("target_bps", ctypes.c_double),
                ("alpha", ctypes.c_double),
                ("timer_stage", ctypes.c_int64), ("byte_stage", ctypes.c_int64),
                ("byte_count", ctypes.c_int64),
                ("alpha_deadline_ns", ctypes.c_int64), ("timer_deadline_ns", ctypes.c_int64),
                ("last_decrease_ns", ctypes.c_int64),
                ("cnps_seen", ctypes.c_uint64), ("decreases", ctypes.c_uint64),
                ("now_s", ctypes.c_double), ("last_cnp_s", ctypes.c_double),
                ("min_rate_seen_bps", ctypes.c_double),
                ("cnps_rx", ctypes.c_uint64), ("cnps_applied", ctypes.c_uint64),
                ("rate_cuts", ctypes.c_uint64), ("rate_increases", ctypes.c_uint64),
                ("unsent", ctypes.c_int64), ("due_ns", ctypes.c_int64),
                ("bytes_due", ctypes.c_int64)]


class DcqcnSettingsLike(Protocol):
    """What :func:`dcqcn_params` reads (the Python reference's ``DcqcnSettings``)."""

    @property
    def timer_s(self) -> float: ...
    @property
    def alpha_interval_s(self) -> float: ...
    @property
    def cnp_interval_s(self) -> float: ...
    @property
    def decrease_interval_s(self) -> float: ...
    @property
    def byte_counter_s(self) -> float: ...
    @property
    def g(self) -> float: ...
    @property
    def fast_recovery_stages(self) -> int: ...
    @property
    def rate_ai_fraction(self) -> float: ...
    @property
    def rate_hai_fraction(self) -> float: ...
    @property
    def min_rate_fraction(self) -> float: ...


@cache
def _lib() -> ctypes.CDLL:
    """The library with this header's argument and result types declared."""
    lib = load_library()
    st = ctypes.POINTER(TnDcqcn)
    lib.tn_dcqcn_init.argtypes = [st, ctypes.POINTER(TnDcqcnParams), ctypes.c_double,
                                  ctypes.c_uint32, ctypes.c_double]
    lib.tn_dcqcn_init.restype = ctypes.c_int
    lib.tn_dcqcn_on_sent.argtypes = [st, ctypes.c_uint64]
    lib.tn_dcqcn_on_sent.restype = None
    lib.tn_dcqcn_tick.argtypes = [st, ctypes.c_double]
    lib.tn_dcqcn_tick.restype = ctypes.c_int
    lib.tn_dcqcn_on_cnp.argtypes = [st, ctypes.c_double]
    lib.tn_dcqcn_on_cnp.restype = ctypes.c_int
    lib.tn_dcqcn_rate_bps.argtypes = [st]
    lib.tn_dcqcn_rate_bps.restype = ctypes.c_double
    return lib


def dcqcn_params(settings: DcqcnSettingsLike, *, initial_alpha: float = 1.0) -> TnDcqcnParams:
    """``tn_dcqcn_params`` from the Python settings."""
    return TnDcqcnParams(timer_s=settings.timer_s, alpha_interval_s=settings.alpha_interval_s,
                         cnp_interval_s=settings.cnp_interval_s,
                         decrease_interval_s=settings.decrease_interval_s,
                         byte_counter_s=settings.byte_counter_s, g=settings.g,
                         fast_recovery_stages=settings.fast_recovery_stages,
                         rate_ai_fraction=settings.rate_ai_fraction,
                         rate_hai_fraction=settings.rate_hai_fraction,
                         min_rate_fraction=settings.min_rate_fraction,
                         initial_alpha=initial_alpha)


class NativeDcqcn:
    """One QP's reaction point in C, with the Python reference's methods."""

    def __init__(self, line_rate_bps: float, settings: DcqcnSettingsLike, *, mtu: int = 1024,
                 now_s: float = 0.0) -> None:
        self._lib = _lib()
        self.params = dcqcn_params(settings)
        self.state = TnDcqcn()
        if self._lib.tn_dcqcn_init(ctypes.byref(self.state), ctypes.byref(self.params),
                                   line_rate_bps, mtu, now_s) != 0:
            raise ConfigError(f"native DCQCN: settings {settings!r} or line rate "
                              f"{line_rate_bps!r} bit/s out of range")

    def on_sent(self, nbytes: int) -> None:
        self._lib.tn_dcqcn_on_sent(ctypes.byref(self.state), nbytes)

    def tick(self, now_s: float) -> bool:
        return bool(self._lib.tn_dcqcn_tick(ctypes.byref(self.state), now_s))

    def on_cnp(self, now_s: float) -> bool:
        return bool(self._lib.tn_dcqcn_on_cnp(ctypes.byref(self.state), now_s))

    @property
    def rate_bps(self) -> float:
        return float(self._lib.tn_dcqcn_rate_bps(ctypes.byref(self.state)))
