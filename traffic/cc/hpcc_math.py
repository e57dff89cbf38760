"""HPCC's formulas, written once for the sender QP and the controller's engine.

Each function takes Python floats (the per-ACK sender, :mod:`traffic.cc.hpcc`, and the
per-flow reference :mod:`controller.cc.hpcc_reference`) or numpy arrays (the
vectorised rate engine, :mod:`controller.cc.hpcc`) and computes the same arithmetic
in the same order, so the sender keeps its bit-for-bit match with ns-3's
``RdmaHw::UpdateRateHp`` and the engine decides what the sender would.  The control
flow around them (which hop, when to commit, per-hop or single rate) stays with the
callers: it differs between an ACK clock and batches of telemetry.

Notation as in the paper (Li et al., SIGCOMM 2019) and ns-3: ``B`` a hop's line rate,
``R_max`` the flow's line rate, ``T`` the base RTT, ``W = R_max T / 8`` the window in
bytes, ``eta`` the target utilisation, ``Rc`` the reference rate.
"""
from __future__ import annotations

import math
from typing import TypeVar

import numpy as np

__all__ = ["ai_rate", "bound", "ewma", "hop_utilisation", "mi_rate", "multiplicative"]

F = TypeVar("F", float, np.ndarray)


def hop_utilisation(tx_bytes_delta: F, tau_s: F, qlen_bytes: F, line_rate_bps: F,
                    max_rate_bps: F | float, base_rtt_s: F | float) -> F:
    """``u_i = txRate / B + qlen R_max / B / W`` with ``txRate = 8 dtx / tau``.

    The queue term is ``qlen / (B T)`` written as ns-3 writes it (through the window
    ``W``), which keeps the sender's rounding identical to ns-3's.
    """
    tx_rate = tx_bytes_delta * 8 / tau_s
    win = max_rate_bps * base_rtt_s / 8
    return tx_rate / line_rate_bps + qlen_bytes * max_rate_bps / line_rate_bps / win  # type: ignore[return-value]


def ewma(u: F, sample: F, tau_s: F, base_rtt_s: F | float) -> F:
    """``(u (T - tau) + sample tau) / T``: the sample weighted by its span (``tau <= T``)."""
    return (u * (base_rtt_s - tau_s) + sample * tau_s) / base_rtt_s  # type: ignore[return-value]


def multiplicative(max_c: F, inc_stage: F | int, max_stage: int) -> F | bool:
    """True where the step is multiplicative: ``U / eta >= 1`` or ``maxStage`` reached."""
    if isinstance(max_c, np.ndarray) or isinstance(inc_stage, np.ndarray):
        return (max_c >= 1) | (inc_stage >= max_stage)  # type: ignore[no-any-return]
    return max_c >= 1 or inc_stage >= max_stage


def mi_rate(rc: F, max_c: F, w_ai: F | float) -> F:
    """Multiplicative step ``Rc / max_c + W_AI``.

    ``max_c = 0`` (a hop that sent nothing and queued nothing for a whole ``T``) is the
    formula's limit, +inf: :func:`bound` turns it into the line rate.
    """
    if isinstance(max_c, np.ndarray):
        with np.errstate(divide="ignore"):
            return rc / max_c + w_ai  # type: ignore[no-any-return]
    return (rc / max_c if max_c > 0 else math.inf) + w_ai  # type: ignore[return-value]


def ai_rate(rc: F, w_ai: F | float) -> F:
    """Additive step ``Rc + W_AI``."""
    return rc + w_ai  # type: ignore[return-value]


def bound(rate: F, min_rate_bps: F | float, max_rate_bps: F | float) -> F:
    """``rate`` within ``[min_rate, max_rate]``."""
    if isinstance(rate, np.ndarray):
        return np.clip(rate, min_rate_bps, max_rate_bps)
    return min(max_rate_bps, max(min_rate_bps, rate))  # type: ignore[return-value]
