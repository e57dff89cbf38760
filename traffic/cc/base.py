"""The two small interfaces a congestion-control algorithm implements.

* :class:`SenderCc`: the algorithm one sender QP runs by itself (ns-3's per-QP state
  in ``RdmaHw``): the requester (:mod:`traffic.requester`) tells it what happens to
  the QP (ACKs carrying echoed INT hops, CNPs, bytes sent, RTT samples, the clock)
  and paces at :attr:`SenderCc.rate_bps`, within :meth:`SenderCc.window_bytes`.
  :class:`SenderCcBase` gives every hook a do-nothing default, so an algorithm
  overrides only the events it reacts to.
* :class:`RateEngine`: the algorithm the controller runs for every flow it tracks,
  fed batches of telemetry (``controller.cc.telemetry.HopSamples``), deciding a rate
  per row (``controller.cc.hpcc.HpccEngine`` is one).

Which algorithm runs where, and under which name, is :mod:`traffic.cc.registry`.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

from formats.int_echo import EchoHop

__all__ = ["RateEngine", "SenderCc", "SenderCcBase"]


@runtime_checkable
class SenderCc(Protocol):
    """One QP's own rate control.  Every ``on_*``/``tick`` returns True when
    :attr:`rate_bps` changed (the requester then resets its pacer)."""

    name: ClassVar[str]
    snapshot_key: ClassVar[str]    # its key in the QP's JSON summary
    wants_echo: ClassVar[bool]     # reacts to the INT hops echoed in ACKs
    pacing_burst_pkts: float | None  # pacer depth in packets; None: the default bucket

    @property
    def rate_bps(self) -> float: ...

    def on_ack(self, hops: Sequence[EchoHop], *, ack_seq: int, next_seq: int,
               now_s: float) -> bool: ...

    def on_cnp(self, now_s: float) -> bool: ...

    def on_sent(self, nbytes: int) -> None: ...

    def tick(self, now_s: float) -> bool: ...

    def on_rtt(self, rtt_s: float) -> None: ...

    def window_bytes(self) -> float | None: ...

    def snapshot(self) -> dict[str, Any]: ...


class SenderCcBase:
    """Do-nothing defaults of :class:`SenderCc`: a constant rate, no window."""

    name: ClassVar[str] = ""
    snapshot_key: ClassVar[str] = "cc"
    wants_echo: ClassVar[bool] = False
    pacing_burst_pkts: float | None = None

    def __init__(self, line_rate_bps: float) -> None:
        self.line_rate_bps = float(line_rate_bps)

    @property
    def rate_bps(self) -> float:
        return self.line_rate_bps

    def on_ack(self, hops: Sequence[EchoHop], *, ack_seq: int, next_seq: int,
               now_s: float) -> bool:
        """An ACK carrying ``hops`` (INT echoed by the receiver's sink); only when
        :attr:`wants_echo`.  ``ack_seq``: first sequence not acknowledged;
        ``next_seq``: the next sequence the QP will send (both count packets)."""
        return False

    def on_cnp(self, now_s: float) -> bool:
        return False

    def on_sent(self, nbytes: int) -> None:
        """The QP put ``nbytes`` on the wire (called after every send round)."""

    def tick(self, now_s: float) -> bool:
        """Called before every send round: time-driven changes (timers)."""
        return False

    def on_rtt(self, rtt_s: float) -> None:
        """A round-trip sample of a packet sent once."""

    def window_bytes(self) -> float | None:
        """Bytes in flight allowed (None: only the QP's configured window)."""
        return None

    def snapshot(self) -> dict[str, Any]:
        """State and counters for the JSON summary."""
        return {"rate_bps": self.rate_bps}


@runtime_checkable
class RateEngine(Protocol):
    """The controller's side: one engine for a table of ``n_flows`` flows."""

    n_flows: int

    def start_flows(self, flow_idx: Any, *, max_rate_bps: Any, base_rtt_s: Any = None,
                    now_ns: int = 0, initial_rate_bps: Any = None) -> None: ...

    def stop_flows(self, flow_idx: Any) -> None: ...

    def update(self, samples: Any, *, commit_mask: Any = None) -> Any: ...

    def stats(self) -> Any: ...
