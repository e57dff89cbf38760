"""A slow receiver against what the test bed's noise makes look like one: one pair into
a host slowed with the host's own sends on time, and slow transfers that resent what
the switches on their paths dropped (the Python switch's queues overflowing after the
machine left it unscheduled: counted by the switch, seen by no link counter)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from controller.diagnose import diagnose
from controller.diagnose.evidence import Evidence
from controller.diagnose.synth import SynthFault, synth_ring
from controller.diagnose.transfers import SLOW_RATIO
from controller.topology.load import load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO = load_topology(ROOT / "mininet_topos" / "topofiles" / "two_dc.yaml")
RANKS = ["h1", "h3", "h5", "h7"]
SLOW = SynthFault(kind="slow_receiver", target="h5", onset=0.6, delay_s=0.4)


def _host(ev: Evidence, host: str):
    return next((c for c in diagnose(ev).culprits if c.component == host), None)


def test_a_slow_receiver_slows_the_data_into_it_and_its_own_sends() -> None:
    ev = synth_ring(TOPO, RANKS, SLOW, seed=3)
    top = diagnose(ev).culprits[0]
    assert (top.component, top.kind) == ("h5", "slow_receiver")
    assert top.evidence["data_into_it_slowed"] == 1.0
    assert top.evidence["own_sends_slowed"] > 0.5


def test_one_pair_into_a_host_slowed_with_its_own_sends_on_time_names_no_host() -> None:
    # (what a loaded Python test bed made of a fault-free trial: h5 -> h7 2x slower,
    # h7's own sends on time, and h7 was named a slow receiver)
    ev = synth_ring(TOPO, RANKS, replace(SLOW, ack_delay_s=0.0), seed=3)
    d = diagnose(ev)
    assert d.slow_pairs == [(1, 2)]            # h3 -> h5, and only it, slowed
    assert all(c.type != "host" for c in d.culprits), d.culprits


def _with_switch_drops(ev: Evidence) -> Evidence:
    """``ev`` with every slow transfer at h5 (rank 2: into it, and its own sends, whose
    ACKs come back into it) resending packets that the queue of s7:1 (the port into
    h5, a deep queue) tail-dropped meanwhile."""
    sends = [r for r in ev.records if r.dir == "send" and r.end is not None]
    base = {p: min(r.end - r.start for r in sends if (r.rank, r.peer) == p)
            for p in ((1, 2), (2, 3))}
    recs, drops, n = [], [(ev.records[0].start - 1.0, 0)], 0
    for r in sorted(ev.records, key=lambda r: r.start):
        p = (r.rank, r.peer)
        if (r.dir == "send" and p in base and r.end is not None
                and r.end - r.start >= SLOW_RATIO * base[p]):
            r = replace(r, retx=20)
            n += 20
            drops.append((r.start + 0.05, n))
        recs.append(r)
    # (a queue of 64 packets, as the Python target reports it: no tiny queue)
    sizes = [(t, 64) for t, _n in drops]
    tel = replace(ev.telemetry, port_drops={("s7", 1): drops}, port_sizes={("s7", 1): sizes})
    return replace(ev, records=recs, telemetry=tel)


def test_slow_transfers_that_resent_what_the_switches_dropped_are_the_networks() -> None:
    ev = _with_switch_drops(synth_ring(TOPO, RANKS, SLOW, seed=3))
    assert _host(ev, "h5") is None
    assert all(c.kind != "tiny_queue" for c in diagnose(ev).culprits)   # a deep queue
    # the same drops at a queue of 2 packets: the tiny queue they are
    tiny = replace(ev.telemetry, port_sizes={("s7", 1): [(t, 2) for t, _ in
                                                         ev.telemetry.port_drops[("s7", 1)]]})
    assert any(c.kind == "tiny_queue" and c.component == "s7:1"
               for c in diagnose(replace(ev, telemetry=tiny)).culprits)


def test_a_receiver_that_dropped_packets_itself_is_named_whatever_the_switches_did() -> None:
    ev = _with_switch_drops(synth_ring(TOPO, RANKS, SLOW, seed=3))
    t0 = ev.records[0].start
    tel = replace(ev.telemetry, host_drops={"h5": [(t0, 0), (ev.now or t0, 300)]})
    ev = replace(ev, telemetry=tel)
    top = diagnose(ev).culprits[0]
    assert (top.component, top.kind) == ("h5", "slow_receiver")
    assert top.evidence["receiver_socket_drops"] == 300
