"""The demo: two datacenters, ring all-reduce across a lossy WAN, FEC from the loss map.

``python -m mininet_topos demo [--out DIR]`` runs the ``demo`` preset
(``mininet_topos/experiments/demo.yaml``): 8 switches, 8 hosts, two 10 ms WAN links,
1 % bursty loss on ``s1:3-s5:3``, a 4-rank ring all-reduce over h1, h3 (DC 1) and h5,
h7 (DC 2) with FEC + selective repeat whose (k, m) the loss-map policy sets while it
runs.  It prints what it found (the lossy link and its measured loss against the
configured one, the bottleneck queue, goodput against the limit) and where the plots
are.  With ``INFLUX_URL`` set it exports the series too.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

__all__ = ["run_demo"]


def run_demo(*, out: Path, switch: str | None = None, influx_url: str | None = None,
             mtls: bool = False, web: str | None = None) -> int:
    from mininet_topos.experiment import load_spec, preset_path, run_specs, sigterm_as_interrupt
    from mininet_topos.experiment.report import control_loop_lines, data_check_line

    (spec,) = load_spec(preset_path("demo"))
    if switch:
        spec = dataclasses.replace(spec, switch=switch)
    with sigterm_as_interrupt():
        try:
            (r,) = run_specs([spec], out, influx_url=influx_url, mtls=mtls, web=web,
                             log=lambda s: print(s, flush=True))
        except KeyboardInterrupt:
            print("interrupted; network torn down", file=sys.stderr)
            return 130
    s = r.summary
    print()
    print("== demo summary ==")
    intel = s.get("int")
    if intel:
        print(f"INT: hop records from {len(intel['switches_reporting'])} switches "
              f"({', '.join(intel['switches_reporting'])}); deepest INT queue "
              f"{intel['max_qlen_pkts']} packets")
        for f in intel["flows"][:8]:
            rate = f"{f['rate_bps'] / 1e6:.2f} Mbit/s" if f.get("rate_bps") else "-"
            print(f"  {f['src']:>9} -> {f['dst']:<9} path {'>'.join(f['path'])}  "
                  f"{f['samples']} records, HPCC rate {rate}")
        for line in control_loop_lines(intel.get("collector")):
            print(line)
    else:
        print(f"telemetry: per-port counters and queues of {len(s.get('queue_max_pkts', {}))} "
              f"switch ports sampled every {spec.sample_interval_s:g} s ({spec.switch}, no INT)")
    ll = s.get("lossy_link") or {}
    if ll and ll.get("link") == spec.links[0].link:
        print(f"the loss map names the lossy WAN link {ll['link']} (configured "
              f"{100 * ll['configured_loss']:.2f} %, measured {100 * ll['loss_rate']:.2f} %)")
    if s.get("fec_policy") == "controller":
        print(f"FEC: the controller's loss-map policy sent {intel.get('fec_records', 0)} "
              "FEC settings to the senders' agents" if intel else "FEC: controller policy")
    for d in s.get("fec_decisions", [])[-4:]:
        print(f"FEC policy: {d['flow']} -> k={d['fec_k']} m={d['fec_m']} "
              f"(path loss {100 * d['raw_loss']:.2f} %)")
    print(f"results in {r.out.resolve()}")
    for name, p in sorted(r.plots.items()):
        print(f"  {name:<13} {p}")
    print(data_check_line(s))
    if not (s.get("data_check") or {}).get("ok"):  # a wrong result fails the demo
        print(f"error: {data_check_line(s)}", file=sys.stderr)
        return 1
    return 0
