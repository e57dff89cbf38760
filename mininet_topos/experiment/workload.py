"""Traffic processes of an experiment: who talks to whom, and each rank's command line.

Why here: the test bed needs the flows (rank pairs and their QP numbers) to map
telemetry and loss to paths and to address rate/FEC feedback, and the argv that starts
``python -m traffic`` on each host; both follow the traffic package's conventions (QP
``s<<16 | d<<8 | c`` at both ends, one process per rank, ``--start-at`` to start
together).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from traffic.cc import registry as cc_registry

from .spec import ExperimentSpec

__all__ = ["Flow", "flows", "traffic_argv"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Flow:
    """One requester QP: rank ``src`` sends to rank ``dst`` on channel ``channel``."""

    src: int
    dst: int
    channel: int
    src_host: str
    dst_host: str

    @property
    def qpn(self) -> int:
        return self.src << 16 | self.dst << 8 | self.channel

    @property
    def name(self) -> str:
        return f"{self.src_host}->{self.dst_host}#{self.channel}"


def _pairs(kind: str, n: int, prefill: int | None) -> list[tuple[int, int]]:
    if kind == "p2p":
        return [(0, 1)]
    if kind == "incast":
        return [(s, 0) for s in range(1, n)]
    if kind == "alltoall":
        return [(s, d) for s in range(n) for d in range(n) if s != d]
    if kind == "allreduce":
        return [(s, (s + 1) % n) for s in range(n)]
    if kind == "kvcache":
        p = prefill if prefill is not None else max(1, n // 2)
        return [(s, d) for s in range(p) for d in range(p, n)]
    raise ValueError(f"workload kind {kind!r}")


def flows(spec: ExperimentSpec) -> list[Flow]:
    """Every requester QP the workload opens."""
    w = spec.workload
    out = []
    for s, d in _pairs(w.kind, len(w.hosts), w.prefill):
        for c in range(w.qps):
            out.append(Flow(src=s, dst=d, channel=c, src_host=w.hosts[s], dst_host=w.hosts[d]))
    return out


def traffic_argv(spec: ExperimentSpec, *, python: str, rank: int, ips: list[str], out: Path,
                 control: Path | None, start_at: float,
                 start_file: Path | None = None) -> list[str]:
    """``python -m traffic`` for ``rank`` of the spec's workload: starting at
    ``start_at``, or, with ``start_file``, at the time the launcher writes there once
    every rank is bound (:mod:`traffic.startgate`)."""
    w = spec.workload
    argv = [python, "-m", "traffic", w.kind, "--hosts", ",".join(ips), "--rank", str(rank),
            "-s", w.size, "-c", str(w.count), "-q", str(w.qps), "-m", spec.recovery,
            "--rate", w.rate, "--mtu", str(w.mtu), "-o", str(out),
            # one seed for all ranks: receivers regenerate what their peers sent from it
            *(["--start-file", str(start_file)] if start_file is not None
              else ["--start-at", f"{start_at:.3f}"]),
            "--seed", str(spec.seed),
            "--timeout", f"{w.timeout_s or spec.duration_s:g}", "--engine", w.engine]
    if control is not None:
        argv += ["--control", str(control)]
    if w.window is not None:
        argv += ["--window", str(w.window)]
    if w.prefill is not None:
        argv += ["--prefill", str(w.prefill)]
    if w.rto_min_s is not None:
        argv += ["--rto-min", f"{w.rto_min_s!r}"]
    if spec.recovery == "fec" and spec.fec_km is not None:
        argv += ["--fec", "{},{}".format(*spec.fec_km)]
    algo = cc_registry.get(spec.cc)
    if algo.runs_in == "sender":  # the senders' own rate control (DCQCN, HPCC per ACK ...)
        argv += ["--cc", algo.name]
        if algo.settings_argv is not None:  # the spec's hpcc: block, as flags
            argv += algo.settings_argv(spec.hpcc)
    argv += ["1"]  # a progress line per second in the log
    return argv
