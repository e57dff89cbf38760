"""HPCC against the DCQCN baseline on an incast through one bottleneck (fluid model).

Both engines run the same scenario: ``n_flows`` senders start at line rate into
one link of the same rate, telemetry (HPCC) or CNPs (DCQCN) come back after one
base RTT. Prints per-algorithm queue and fairness figures and, with an output
folder, writes a PNG of rates and queue over time.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from controller.cc.errors import ParameterError
from controller.cc.hpcc import HpccEngine, HpccParams
from controller.cc.sim import FluidNetwork, FluidSim
from traffic.cc.dcqcn_engine import CnpGenerator, DcqcnEngine, DcqcnParams


@dataclass(slots=True, kw_only=True)
class RunResult:
    name: str
    t_s: np.ndarray
    rates_bps: np.ndarray
    queue_bytes: np.ndarray


def _incast(n_flows: int, link_bps: float) -> FluidNetwork:
    return FluidNetwork(link_rate_bps=np.array([link_bps]),
                        paths=np.zeros((n_flows, 1), dtype=np.int64))


def run_hpcc(*, n_flows: int, link_bps: float, rtt_s: float, duration_s: float) -> RunResult:
    dt = rtt_s / 4
    sim = FluidSim(net=_incast(n_flows, link_bps), dt_s=dt, feedback_delay_s=rtt_s)
    eng = HpccEngine(n_flows=n_flows, params=HpccParams(base_rtt_s=rtt_s),
                     clock_ns=lambda: sim.now_ns)
    eng.start_flows(np.arange(n_flows), max_rate_bps=link_bps)
    steps = int(duration_s / dt)
    rates, queue = np.zeros((steps, n_flows)), np.zeros(steps)
    for k in range(steps):
        sim.step(eng.state.rate_bps)
        eng.update(sim.telemetry())
        rates[k], queue[k] = eng.state.rate_bps, sim.queue_bytes[0]
    return RunResult(name="HPCC", t_s=np.arange(1, steps + 1) * dt, rates_bps=rates,
                     queue_bytes=queue)


def run_dcqcn(*, n_flows: int, link_bps: float, rtt_s: float, duration_s: float,
              seed: int = 0) -> RunResult:
    dt = min(rtt_s / 4, 2e-6)
    sim = FluidSim(net=_incast(n_flows, link_bps), dt_s=dt, feedback_delay_s=rtt_s)
    eng = DcqcnEngine(n_flows=n_flows, params=DcqcnParams())
    eng.start_flows(np.arange(n_flows), max_rate_bps=link_bps, now_ns=0)
    npg = CnpGenerator(n_flows=n_flows)
    rng = np.random.default_rng(seed)
    # marking thresholds as in the public HPCC/DCQCN runs: 100 kB / 400 kB per 25G, pmax 0.2
    kmin, kmax = 100e3 * link_bps / 25e9, 400e3 * link_bps / 25e9
    steps = int(duration_s / dt)
    rates, queue = np.zeros((steps, n_flows)), np.zeros(steps)
    for k in range(steps):
        rate = eng.rate_bps.copy()
        sim.step(rate)
        eng.advance(sim.now_ns)
        marked = sim.ecn_marks(rate, kmin_bytes=kmin, kmax_bytes=kmax, pmax=0.2,
                               mtu_bytes=1000, rng=rng)
        f, _ = npg.on_marked(np.flatnonzero(marked), sim.now_ns)
        eng.on_cnp(f, sim.now_ns)
        eng.on_sent(np.arange(n_flows), (rate * dt / 8).astype(np.int64))
        rates[k], queue[k] = rate, sim.queue_bytes[0]
    return RunResult(name="DCQCN", t_s=np.arange(1, steps + 1) * dt, rates_bps=rates,
                     queue_bytes=queue)


def jain(x: np.ndarray) -> float:
    """Jain's fairness index of a rate vector (1 = equal shares)."""
    return float(x.sum() ** 2 / (x.size * (x * x).sum())) if x.any() else 0.0


def summary_lines(results: list[RunResult], link_bps: float) -> list[str]:
    lines = [(f"{'algo':<6} {'util %':>7} {'q p50 kB':>9} {'q p99 kB':>9} {'q max kB':>9} "
             f"{'Jain':>6}")]
    for r in results:
        half = r.t_s.size // 2  # second half: after the start-up transient
        util = r.rates_bps[half:].sum(axis=1).mean() / link_bps * 100
        q = r.queue_bytes[half:] / 1e3
        lines.append(f"{r.name:<6} {util:7.1f} {np.percentile(q, 50):9.1f} "
                     f"{np.percentile(q, 99):9.1f} {r.queue_bytes.max() / 1e3:9.1f} "
                     f"{jain(r.rates_bps[half:].mean(axis=0)):6.3f}")
    return lines


def plot(results: list[RunResult], path: Path) -> Path:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.2 * len(results)))
    for i, r in enumerate(results):
        ax = fig.add_subplot(len(results), 2, 2 * i + 1)
        ax.plot(r.t_s * 1e3, r.rates_bps / 1e9, lw=0.8)
        ax.set_title(f"{r.name}: rate per flow")
        ax.set_xlabel("time (ms)")
        ax.set_ylabel("Gbit/s")
        ax2 = fig.add_subplot(len(results), 2, 2 * i + 2)
        ax2.plot(r.t_s * 1e3, r.queue_bytes / 1e3, color="tab:red", lw=0.8)
        ax2.set_title(f"{r.name}: bottleneck queue")
        ax2.set_xlabel("time (ms)")
        ax2.set_ylabel("kB")
    fig.tight_layout()
    FigureCanvasAgg(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path


def demo(*, n_flows: int = 8, link_bps: float = 25e9, rtt_s: float = 10e-6,
         duration_s: float = 0.01, out_dir: Path | None = None) -> list[str]:
    """Run both algorithms; return the printable summary (and write the PNG)."""
    if n_flows < 1 or link_bps <= 0 or rtt_s <= 0 or duration_s <= 10 * rtt_s:
        raise ParameterError(
            f"demo: need flows >= 1, positive rate and RTT, duration > 10 RTT; got "
            f"flows={n_flows} rate={link_bps} rtt={rtt_s} duration={duration_s}")
    res = [run_hpcc(n_flows=n_flows, link_bps=link_bps, rtt_s=rtt_s, duration_s=duration_s),
           run_dcqcn(n_flows=n_flows, link_bps=link_bps, rtt_s=rtt_s, duration_s=duration_s)]
    lines = [(f"{n_flows} flows into one {link_bps / 1e9:g} Gbit/s link, base RTT "
             f"{rtt_s * 1e6:g} us, {duration_s * 1e3:g} ms (second half measured)")]
    lines += summary_lines(res, link_bps)
    if out_dir is not None:
        lines.append(f"wrote {plot(res, Path(out_dir) / 'cc_incast.png')}")
    return lines
