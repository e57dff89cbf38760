"""Text tables of rate decisions and engine stats for terminals (under 80 columns)."""
from __future__ import annotations

from collections.abc import Sequence

from controller.cc.errors import TelemetryError
from controller.cc.hpcc import HpccStats, RateDecisions
from controller.cc.latency import LatencySummary


def rate_table(d: RateDecisions, names: Sequence[str]) -> list[str]:
    """One line per row of ``d``: rate, bottleneck hop and utilisation."""
    if len(names) != d.flow_idx.size:
        raise TelemetryError(f"rate_table: {len(names)} names for {d.flow_idx.size} rows")
    lines = [f"{'flow':<24} {'rate Gbit/s':>11} {'bottleneck':>10} {'U':>6}"]
    for i, name in enumerate(names):
        hop = f"hop {d.bottleneck_hop[i]}" if d.bottleneck_hop[i] >= 0 else "-"
        lines.append(f"{name[:24]:<24} {d.rate_bps[i] / 1e9:11.3f} {hop:>10} "
                     f"{d.utilisation[i]:6.3f}")
    return lines


def _ms(s: LatencySummary) -> str:
    if s.count == 0:
        return "-"
    return f"p50 {s.p50_s * 1e3:.3f} ms, p99 {s.p99_s * 1e3:.3f} ms ({s.count})"


def stats_lines(st: HpccStats) -> list[str]:
    """Engine counters and loop latencies."""
    return [
        (f"samples {st.samples}, flows {st.active_flows} "
        f"({st.flows_below_line_rate} below line rate)"),
        f"telemetry -> decision : {_ms(st.telemetry_to_decision)}",
        f"telemetry -> feedback : {_ms(st.telemetry_to_sent)}",
        f"decision -> applied   : {_ms(st.decision_to_applied)}",
        *([f"telemetry -> applied : {_ms(st.telemetry_to_applied)}"]
          if st.telemetry_to_applied is not None else []),
        *([f"host -> applied      : {_ms(st.host_to_applied)}"]
          if st.host_to_applied is not None and st.host_to_applied.count else []),
    ]


__all__ = ["rate_table", "stats_lines"]
