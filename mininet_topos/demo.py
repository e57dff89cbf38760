"""The demo: two datacenters, ring all-reduce across a lossy WAN, FEC from the loss map.

``python -m mininet_topos demo [--out DIR]`` runs the ``demo`` preset
(``mininet_topos/presets/demo.yaml``): 8 switches running the P4 program on
softswitch's eBPF target, 8 hosts, two 10 ms WAN links shaped to 20 Mbit/s, 1 % bursty
loss on ``s1:3-s5:3``, a 4-rank ring all-reduce (2 x 16 MB in RoCE's 4 KiB frames) over
h1, h3 (DC 1) and h5, h7 (DC 2) with HPCC per ACK in the senders and FEC + selective
repeat whose (k, m) the loss-map policy sets while it runs (the preset ``demo_1k`` is
the same with 1 KiB frames).  It prints what it found (every rank's data check, the lossy
link and its measured loss against the configured one, the deepest queue and the tail
drops, goodput against the path's bottleneck) and where the plots are; a wrong or
missing result is an error.  ``--switch softswitch`` (the Python target) runs the same
at a tenth of the rate.  With ``INFLUX_URL`` set it exports the series too.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

__all__ = ["run_demo"]

# the demo's workload where the switches run P4 in user space (softswitch's Python
# target, BMv2): they carry a tenth of what the eBPF target does
PYTHON_SPEED = {"softswitch": {"rate": "8M", "size": "1M"},
                "bmv2": {"rate": "8M", "size": "1M"}}


def run_demo(*, out: Path, switch: str | None = None, influx_url: str | None = None,
             mtls: bool = False, web: str | None = None) -> int:
    from mininet_topos.experiment import load_spec, preset_path, run_specs, sigterm_as_interrupt
    from mininet_topos.experiment.report import (
        control_loop_lines,
        data_check_line,
        engine_line,
        queue_lines,
    )

    (spec,) = load_spec(preset_path("demo"))
    if switch:
        spec = dataclasses.replace(spec, switch=switch)
    if spec.switch in PYTHON_SPEED:   # a tenth of the eBPF target's rates
        speed = PYTHON_SPEED[spec.switch]
        spec = dataclasses.replace(spec, workload=dataclasses.replace(
            spec.workload, rate=speed["rate"], size=speed["size"]))
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
    print(engine_line(s))   # the QPs' data path: the native engine unless it is not built
    intel = s.get("int")
    if intel:
        print(f"INT: hop records from {len(intel['switches_reporting'])} switches "
              f"({', '.join(intel['switches_reporting'])})")
        data = [f for f in intel["flows"] if f.get("kind") != "ack"]   # not ACK directions
        for f in data[:8]:
            rate = (f"controller's HPCC rate {f['rate_bps'] / 1e6:.2f} Mbit/s"
                    if f.get("rate_bps") and spec.cc == "hpcc" else "")
            print(f"  {f['src']:>9} -> {f['dst']:<9} path {'>'.join(f['path'])}  "
                  f"{f['samples']} records{', ' + rate if rate else ''}")
        if spec.cc == "hpcc":   # the controller's loop sets the rates only then
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
    for line in queue_lines(s):
        print(line)
    gp, lim = s.get("goodput_tx_bps_total") or 0.0, s.get("goodput_limit") or {}
    if lim.get("bps"):
        util = s.get("utilisation")
        print(f"goodput {gp / 1e6:.1f} Mbit/s against a limit of {lim['bps'] / 1e6:.0f} "
              f"Mbit/s set by {lim.get('bottleneck')} ({lim.get('model')})"
              + (f"; utilisation {100 * util:.0f} %" if util is not None else ""))
    print(f"results in {r.out.resolve()}")
    for name, p in sorted(r.plots.items()):
        print(f"  {name:<13} {p}")
    print(data_check_line(s))
    if not (s.get("data_check") or {}).get("ok"):  # a wrong result fails the demo
        print(f"error: {data_check_line(s)}", file=sys.stderr)
        return 1
    return 0
