"""Tail drops in one spike are no tiny queue (synthetic runs).

On the loaded test bed a user-space delay line that is descheduled for ~100 ms releases
its backlog at once; the full-depth FIFO of the router port after it overflows and
loses dozens of packets in one sample interval.  A buffer cut too small instead drops
a few packets at many bursts.  The first is a transient (no fault); the second names
its port, also when a spike happened elsewhere in the same run."""
from __future__ import annotations

from pathlib import Path

from controller.diagnose import diagnose
from controller.diagnose.evidence import Evidence
from controller.diagnose.synth import SynthFault, synth_ring
from controller.topology.load import load_topology

TOPO = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                     / "two_dc.yaml")
RANKS = ["h1", "h3", "h5", "h7"]
T0 = 1.7e9


def _spike(ev: Evidence, port: tuple[str, int], at: float, drops: tuple[int, ...]) -> None:
    """Tail drops at ``port``: ``drops`` in consecutive sample intervals from ``at``."""
    bins = sorted({s.t for ss in ev.telemetry.ports.values() for s in ss})
    total, series = 0, []
    for t in bins:
        k = round((t - (T0 + at)) / 0.25)
        if 0 <= k < len(drops):
            total += drops[k]
        series.append((t, total))
    ev.telemetry.port_drops[port] = series


def _busy_port(ev: Evidence, not_port: tuple[str, int] | None = None) -> tuple[str, int]:
    """A fabric port the ring's flows leave a switch by (not ``not_port``)."""
    sw_ports = {(h.split(":")[0], int(h.split(":")[1].split("->")[0]))
                for f in ev.telemetry.flows for h in f.path}
    return next(p for p in sorted(sw_ports) if p[0].startswith("s") and p != not_port
                and (p[0], p[1]) in ev.telemetry.ports and not str(
                    TOPO.link_at(*p).role).startswith("host"))


def test_one_spike_of_drops_in_a_clean_run_is_no_fault() -> None:
    ev = synth_ring(TOPO, RANKS, None, seed=1)
    _spike(ev, _busy_port(ev), 1.0, (65,))
    assert not diagnose(ev).fault
    _spike(ev, _busy_port(ev), 1.0, (66, 179))    # two intervals: still one event
    assert not diagnose(ev).fault


def test_steady_drops_are_a_tiny_queue_and_outrank_a_spike_elsewhere() -> None:
    ev = synth_ring(TOPO, RANKS, None, seed=1)
    port = _busy_port(ev)
    _spike(ev, port, 1.0, (3, 5, 2, 4, 6, 3))
    d = diagnose(ev)
    assert d.culprits and (d.culprits[0].type, d.culprits[0].component,
                           d.culprits[0].kind) == ("port", f"{port[0]}:{port[1]}",
                                                   "tiny_queue")
    other = _busy_port(ev, not_port=port)
    _spike(ev, other, 1.5, (7,) + (0,) * 14 + (65,))
    d = diagnose(ev)
    assert d.culprits[0].component == f"{port[0]}:{port[1]}"
    assert all(c.component != f"{other[0]}:{other[1]}" for c in d.culprits)


def test_a_synthetic_tiny_queue_is_still_found_beside_a_spike() -> None:
    target = "s1:3"
    seed = next(s for s in range(1, 60) if any(
        x.startswith(target + "->") for f in synth_ring(TOPO, RANKS, None, seed=s)
        .telemetry.flows for x in f.path))
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="tiny_queue", target=target, onset=0.6),
                    seed=seed)
    _spike(ev, _busy_port(ev, not_port=("s1", 3)), 1.0, (72,))
    top = diagnose(ev).culprits[0]
    assert (top.type, top.component, top.kind) == ("port", target, "tiny_queue")
