"""A loss map end to end on a synthetic leaf-spine trace.

Two leaves (s1, s2) joined by two spines (s3, s4), four flows spread over both
spines. Link s1-s3 drops in bursts (Gilbert-Elliott) and reports link-sequence
digests and counters; link s4-s2 drops independently and has no counters (a
neighbour without link sequence numbers), so its losses are found by voting
over the flows' PSN gaps. Prints the per-link table and per-flow FEC choice and
writes the heat map and burst plots.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from controller.lossmap.bins import TimeBins
from controller.lossmap.burst import cycles_from_events, fit_gilbert_elliott
from controller.lossmap.links import LinkCounters, LossEvents, link_loss_map
from controller.lossmap.localize import localize
from controller.lossmap.plots import plot_bursts, plot_heatmap
from controller.lossmap.policy import fit_link_models, path_fec
from controller.lossmap.psn import flow_loss_map
from controller.lossmap.report import fec_table, link_table
from controller.lossmap.synth import make_trace

LINKS = ("h1-s1", "h2-s1", "s1-s3", "s1-s4", "s3-s2", "s4-s2", "s2-h3", "s2-h4")
FLOWS = (("h1>h3", [0, 2, 4, 6]), ("h1>h4", [0, 3, 5, 7]), ("h2>h3", [1, 3, 5, 6]),
         ("h2>h4", [1, 2, 4, 7]))
LOSSY = {2: (0.002, 0.25, 0.9), 5: (0.5, 0.5, 0.004)}
UNMONITORED = (0, 1, 5, 6, 7)   # host links and s4-s2 report no link sequence numbers


def demo(*, out_dir: Path | None = None, packets_per_flow: int = 50_000, seed: int = 1,
         target_residual: float = 1e-4) -> list[str]:
    paths = [p for _, p in FLOWS]
    bin_ns = 5 * 10**6
    tr = make_trace(paths=paths, n_links=len(LINKS), link_ge=LOSSY,
                    packets_per_flow=packets_per_flow, interval_ns=1000, sample_ns=bin_ns,
                    seed=seed)
    bins = TimeBins(start_ns=0, bin_ns=bin_ns, n_bins=int(tr.host_ts.max() // bin_ns) + 1)
    keep = ~np.isin(tr.events.link_idx, UNMONITORED)
    ev = LossEvents(link_idx=tr.events.link_idx[keep], ts_ns=tr.events.ts_ns[keep],
                    expected=tr.events.expected[keep], received=tr.events.received[keep])
    monitored = np.setdiff1d(np.arange(len(LINKS)), UNMONITORED)
    mc = np.isin(tr.counters.link_idx, monitored)
    c = tr.counters
    counters = LinkCounters(link_idx=c.link_idx[mc], ts_ns=c.ts_ns[mc],
                            rx_packets=c.rx_packets[mc], lost_packets=c.lost_packets[mc],
                            counter_bits=c.counter_bits)
    links = link_loss_map(bins=bins, n_links=len(LINKS), events=ev, counters=counters,
                          event_links=monitored, prefer="events")
    flows = flow_loss_map(bins=bins, n_flows=len(FLOWS), flow_idx=tr.host_flow,
                          ts_ns=tr.host_ts, psn=tr.host_psn)
    merged = localize(flows=flows, paths=paths, links=links).link_map
    truth = np.array([t.size for t in tr.link_lost_ts])
    fits = {}
    for i in range(len(LINKS)):
        cy = cycles_from_events(ev, i)
        if cy.loss_len.size >= 20:
            fits[i] = (cy, fit_gilbert_elliott(cy))
    lines = link_table(merged, LINKS, fits={i: f for i, (_, f) in fits.items()}, truth=truth)
    models = fit_link_models(merged, events=ev)
    fec = path_fec(paths=paths, models=models, target_residual=target_residual,
                   max_overhead=0.5)
    lines.append(f"FEC for residual loss <= {target_residual:g}, at most 50 % overhead:")
    lines += fec_table(fec, [name for name, _ in FLOWS])
    if out_dir is not None:
        out = Path(out_dir)
        lines.append(f"wrote {plot_heatmap(merged, out / 'loss_heatmap.png', link_names=LINKS)}")
        for i, (cy, fit) in fits.items():
            p = plot_bursts(cy, out / f"bursts_{LINKS[i]}.png", link_name=LINKS[i], fit=fit)
            lines.append(f"wrote {p}")
    return lines
