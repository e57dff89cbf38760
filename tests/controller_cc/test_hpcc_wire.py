"""HPCC fed through the real telemetry path: Telemetry Reports as a sink switch sends
them (48-bit microsecond timestamps, 32-bit tx bytes, Mbit/s line rates), decoded by
the collector's decoder and mapped to ``HopSamples`` by its feed, as in deployment."""
from __future__ import annotations

import numpy as np
import pytest

from controller.cc import V1MODEL_TS_MODULUS_NS, FluidNetwork, FluidSim, HpccEngine, HpccParams

synth = pytest.importorskip("controller.int.synth")
feed = pytest.importorskip("controller.int.feed")
decode = pytest.importorskip("controller.int.decode")

G = 1e9


def reports_from_sim(sim: FluidSim, sports: list[int], seq0: int) -> list[bytes]:
    t = sim.telemetry()
    out = []
    for row, sport in enumerate(sports):
        hops = [synth.Hop(node_id=int(t.node_id[row, h]),
                          egress_ts_us=int(t.ts_ns[row, h]) // 1000,
                          tx_bytes=int(t.tx_bytes[row, h]),
                          queue_bytes=int(t.qlen_bytes[row, h]),
                          line_rate_mbps=int(t.line_rate_bps[row, h] // 1e6))
                for h in range(int(t.n_hops[row]))]
        out.append(synth.build_hpcc_report(node_id=99, seq=(seq0 + row) & 0x3FFFFF, hops=hops,
                                           sport=sport))
    return out


def test_reports_through_decoder_drive_fair_share():
    B, T = 10 * G, 40e-6
    # three flows cross s1 (link 0, 25G) then s2 (link 1, 10G: the bottleneck)
    net = FluidNetwork(link_rate_bps=[25 * G, B], paths=[[0, 1]] * 3)
    sim = FluidSim(net=net, dt_s=T / 4, feedback_delay_s=T,
                   ts_start_ns=V1MODEL_TS_MODULUS_NS - 3_000_000,
                   ts_modulus_ns=V1MODEL_TS_MODULUS_NS, tx_start_bytes=(1 << 32) - 2_000_000)
    eng = HpccEngine(n_flows=3, params=HpccParams(base_rtt_s=T, rate_ai_fraction=0.005,
                                                  ts_modulus_ns=V1MODEL_TS_MODULUS_NS),
                     clock_ns=lambda: sim.now_ns)
    eng.start_flows(np.arange(3), max_rate_bps=25 * G, initial_rate_bps=[25 * G, 5 * G, 1 * G])
    sports = [49152, 49153, 49154]
    slot_of_sport = {s: i for i, s in enumerate(sports)}
    dec = decode.ReportDecoder()
    hist = []
    for k in range(1200):
        sim.step(eng.state.rate_bps)
        batch = dec.decode(reports_from_sim(sim, sports, 3 * k), arrival_ns=sim.now_ns)
        slots = np.array([slot_of_sport[int(s)] for s in batch.samples["sport"]])
        d = eng.update(feed.hop_samples(batch, slots))
        hist.append(eng.state.rate_bps.copy())
    assert d.updated.all() and (d.bottleneck_hop == 1).all()
    final = np.array(hist[-200:]).mean(axis=0)
    share = (0.95 * B + 3 * 0.005 * 25 * G) / 3
    assert np.all(np.abs(final - share) / share < 0.08), final / G
    assert sim.now_ns > 3_000_000  # the timestamps and tx bytes wrapped during the run
