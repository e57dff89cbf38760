"""HPCC rate updates per second for many flows: vectorised engine vs a per-flow loop.

Also prints loss-map throughput (host records and digests per second through the
streaming maps, localisation time, FEC choice time) unless --no-lossmap.

Both run in the same process on the same synthetic telemetry (every flow sends
one INT sample per round across ``--hops`` hops); the baseline is the scalar
reference implementation, one flow and one hop at a time in Python. The two must
agree on every rate, so the speed-up is for identical results.

Examples:
  python -m bench.bench_cc                    # 10,000 flows, 5 hops
  python -m bench.bench_cc --flows 100000 --rounds 10
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np

from controller.cc import DcqcnEngine, HopSamples, HpccEngine, HpccParams
from controller.cc.hpcc_reference import FlowRef, reference_update
from controller.lossmap import (
    FlowLossStream,
    LinkLossStream,
    LinkModel,
    LossEvents,
    TimeBins,
    choose_fec,
    link_loss_map,
    localize,
)


def make_rounds(flows: int, hops: int, rounds: int, seed: int) -> list[HopSamples]:
    """Telemetry for ``rounds`` rounds, one sample per flow each, counters wrapping."""
    rng = np.random.default_rng(seed)
    line = np.full((flows, hops), 100e9)
    ts = rng.integers(0, 1 << 40, size=(flows, hops), dtype=np.uint64)
    tx = rng.integers(0, 1 << 32, size=(flows, hops), dtype=np.uint64)
    node = np.tile(np.arange(1, hops + 1, dtype=np.uint32), (flows, 1))
    out = []
    for k in range(rounds):
        step = rng.integers(2_000, 10_000, size=(flows, 1)).astype(np.uint64)
        ts = ts + step
        sent = (step.astype(float) * 100e9 / 8e9 * rng.uniform(0.3, 1.1, (flows, hops)))
        tx = (tx + sent.astype(np.uint64)) & np.uint64(0xFFFFFFFF)
        q = rng.uniform(0, 100_000, (flows, hops))
        out.append(HopSamples(flow_idx=np.arange(flows), n_hops=np.full(flows, hops),
                              arrival_ns=np.full(flows, (k + 1) * 6_000), node_id=node,
                              ts_ns=ts, qlen_bytes=q, tx_bytes=tx, line_rate_bps=line))
    return out


def bench_vectorised(batches: list[HopSamples], params: HpccParams, *,
                     stamp_arrival: bool = False) -> tuple[float, np.ndarray, HpccEngine]:
    """Time every round after the first (which only primes the per-hop history).

    With ``stamp_arrival`` each batch is stamped with the monotonic clock just
    before it is handed over, so the engine's loop latency is real.
    """
    n = len(batches[0])
    eng = HpccEngine(n_flows=n, params=params)
    eng.start_flows(np.arange(n), max_rate_bps=100e9)
    if stamp_arrival:   # the priming round counts in the latency ring too
        batches[0].arrival_ns[:] = time.monotonic_ns()
    eng.update(batches[0])
    t0 = time.perf_counter()
    for b in batches[1:]:
        if stamp_arrival:
            b.arrival_ns[:] = time.monotonic_ns()
        eng.update(b)
    return time.perf_counter() - t0, eng.state.rate_bps.copy(), eng


def bench_loop(batches: list[HopSamples], params: HpccParams, flows: int) -> tuple[float,
                                                                                  np.ndarray]:
    refs = [FlowRef(max_rate_bps=100e9, base_rtt_s=params.base_rtt_s, rate_bps=100e9,
                    rc_bps=100e9) for _ in range(flows)]
    # convert to Python lists outside the timed region: the baseline is the loop itself
    plain = [(b.arrival_ns.tolist(), b.node_id[:flows].tolist(), b.ts_ns[:flows].tolist(),
              b.qlen_bytes[:flows].tolist(), b.tx_bytes[:flows].tolist(),
              b.line_rate_bps[:flows].tolist()) for b in batches]
    t0 = 0.0
    for k, (arrival, node, ts, q, tx, line) in enumerate(plain):
        if k == 1:  # round 0 only primes the history, as in bench_vectorised
            t0 = time.perf_counter()
        for f in range(flows):
            reference_update(refs[f], params, arrival_ns=arrival[f], node=node[f],
                             ts_ns=ts[f], qlen_bytes=q[f], tx_bytes=tx[f],
                             line_rate_bps=line[f])
    return time.perf_counter() - t0, np.array([r.rate_bps for r in refs])


def bench_dcqcn(flows: int, rounds: int) -> float:
    eng = DcqcnEngine(n_flows=flows)
    eng.start_flows(np.arange(flows), max_rate_bps=100e9, now_ns=0)
    rng = np.random.default_rng(1)
    idx = np.arange(flows)
    t0 = time.perf_counter()
    for k in range(rounds):
        now = (k + 1) * 10_000
        eng.advance(now)
        eng.on_cnp(idx[rng.random(flows) < 0.1], now)
        eng.on_sent(idx, 100_000)
    return time.perf_counter() - t0


def bench_lossmap(flows: int) -> list[str]:
    """Loss-map figures; returns printable lines."""
    rng = np.random.default_rng(2)
    n_rec, per_batch = 1_000_000, 50_000
    f = rng.integers(0, flows, n_rec)
    ts = np.sort(rng.integers(0, 10**9, n_rec))
    psn = (np.bincount(f, minlength=flows).cumsum()[f] - 1) % (1 << 24)  # any PSN pattern
    keep = rng.random(n_rec) > 0.001
    fs = FlowLossStream(n_flows=flows, bin_ns=10**7, n_bins=100)
    t0 = time.perf_counter()
    for a in range(0, n_rec, per_batch):
        m = keep[a:a + per_batch]
        fs.add(flow_idx=f[a:a + per_batch][m], ts_ns=ts[a:a + per_batch][m],
               psn=psn[a:a + per_batch][m])
    rec_s = time.perf_counter() - t0
    n_links, n_ev = 100, 200_000
    ev = LossEvents(link_idx=rng.integers(0, n_links, n_ev), ts_ns=np.sort(
        rng.integers(0, 10**9, n_ev)), expected=np.arange(n_ev) * 10,
        received=np.arange(n_ev) * 10 + rng.integers(1, 4, n_ev))
    ls = LinkLossStream(n_links=n_links, bin_ns=10**7, n_bins=100)
    t0 = time.perf_counter()
    for a in range(0, n_ev, 20_000):
        i = slice(a, a + 20_000)
        ls.add_events(LossEvents(link_idx=ev.link_idx[i], ts_ns=ev.ts_ns[i],
                                 expected=ev.expected[i], received=ev.received[i]))
    ev_s = time.perf_counter() - t0
    bins = TimeBins(start_ns=0, bin_ns=10**7, n_bins=60)
    paths = rng.integers(0, n_links, size=(flows, 4))
    fm = fs.snapshot()
    fm.bins = bins
    fm.lost, fm.delivered = fm.lost[:, :60], fm.delivered[:, :60]
    t0 = time.perf_counter()
    localize(flows=fm, paths=paths, links=link_loss_map(bins=bins, n_links=n_links))
    loc_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pol = choose_fec([LinkModel(p=0.005, r=0.2, loss_in_bad=0.6), LinkModel.bernoulli(1e-3)],
                     target_residual=1e-4)
    fec_s = time.perf_counter() - t0
    return [
        f"Loss maps ({flows} flows, {n_links} links)",
        f"  host records -> flow map : {n_rec / rec_s:14,.0f} records/s (batches of {per_batch})",
        f"  digests -> link map      : {n_ev / ev_s:14,.0f} events/s",
        (f"  localisation             : {loc_s * 1e3:10.1f} ms for {flows} flows x {n_links} "
         "links x 60 bins"),
        f"  FEC choice (GE + Bernoulli path): {fec_s * 1e3:.1f} ms -> k={pol.k} m={pol.m}",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 epilog=__doc__.split("Examples:")[1],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=10_000)
    ap.add_argument("--hops", type=int, default=5, choices=range(1, 9), metavar="1..8")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--no-lossmap", action="store_true", help="skip the loss-map figures")
    ap.add_argument("--loop-rounds", type=int, default=4,
                    help="rounds for the slow per-flow baseline (default 4)")
    args = ap.parse_args(argv)
    if args.flows <= 0 or args.rounds <= 1 or args.loop_rounds <= 1:
        print("bench_cc: --flows must be > 0, --rounds and --loop-rounds > 1", file=sys.stderr)
        return 2
    params = HpccParams(base_rtt_s=5e-6)
    batches = make_rounds(args.flows, args.hops, args.rounds, seed=0)
    loop_n = min(args.loop_rounds, args.rounds)
    # same first rounds through both, results must match
    _, check_rates, _ = bench_vectorised(batches[:loop_n], params)
    loop_s, loop_rates = bench_loop(batches[:loop_n], params, args.flows)
    vec_s, _, eng = bench_vectorised(batches, params, stamp_arrival=True)
    agree = np.allclose(check_rates, loop_rates, rtol=1e-9)
    vec_ups = args.flows * (args.rounds - 1) / vec_s
    loop_ups = args.flows * (loop_n - 1) / loop_s
    ph_s, _, _ = bench_vectorised(batches, HpccParams(base_rtt_s=5e-6, per_hop_rates=True))
    dc_s = bench_dcqcn(args.flows, args.rounds)
    lat = eng.latency.summary()["telemetry_to_decision"]
    print(f"HPCC rate updates, {args.flows} flows x {args.hops} hops "
          f"(one INT sample per flow per round)")
    print(f"  vectorised engine : {vec_ups:14,.0f} updates/s  "
          f"({vec_s / (args.rounds - 1) * 1e3:7.2f} ms per round of {args.flows} flows)")
    print(f"  per-flow loop     : {loop_ups:14,.0f} updates/s  "
          f"({loop_s / (loop_n - 1) * 1e3:7.2f} ms per round)")
    print(f"  speed-up          : {vec_ups / loop_ups:14.1f} x   results agree: {agree}")
    print(f"  per-hop rates mode: {args.flows * (args.rounds - 1) / ph_s:14,.0f} updates/s "
          "(ns-3 MultiRate)")
    print(f"  arrival->decision : p50 {lat.p50_s * 1e3:.2f} ms, p99 {lat.p99_s * 1e3:.2f} ms "
          "(whole-round batches)")
    print(f"DCQCN reaction point: {args.flows * args.rounds / dc_s:14,.0f} flow-steps/s "
          f"(timers + 10 % CNPs + byte counters)")
    if not args.no_lossmap:
        print("\n".join(bench_lossmap(args.flows)))
    return 0 if agree else 1


if __name__ == "__main__":
    sys.exit(main())
