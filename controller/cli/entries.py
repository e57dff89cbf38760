"""``python -m controller entries --topology FILE [--switch NAME]``: the entries the
controller would write, without any switch (a dry run of the intent).

examples:
  python -m controller entries --topology mininet_topos/topofiles/leaf_spine.yaml --switch s3
  python -m controller entries --topology dumbbell.yaml --sink-mode report --collector-host h5
  python -m controller entries --topology dumbbell.yaml --sink-mode report --collector-host h5 \\
      --standby-collector h1
"""
from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from controller.intent import SinkMode
    p = sub.add_parser("entries", help="print the table entries computed from a topology",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--topology", required=True, metavar="FILE")
    p.add_argument("--switch", action="append", metavar="NAME", help="only these switches")
    p.add_argument("--program", metavar="P4", help="P4 program (default: p4/int_rocev2.p4)")
    p.add_argument("--sink-mode", choices=[m.value for m in SinkMode], default="host")
    p.add_argument("--collector-host", metavar="HOST")
    p.add_argument("--standby-collector", action="append", default=[], metavar="SPEC",
                   help="a further report destination, as `controller run --standby-collector`")
    p.set_defaults(func=entries)


def entries(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from controller.intent import (
        COLLECTOR_UDP_PORT,
        CollectorSpec,
        IntentError,
        IntentOptions,
        SinkMode,
        compute_intent,
    )
    from controller.p4rt import P4rtError, Schema, entry_to_proto, format_entry, load_pipeline
    from controller.runner.config import default_program, parse_collector
    from controller.runner.errors import RunError
    from controller.topology import TopologyError, load_topology
    try:
        topo = load_topology(args.topology)
        standbys = tuple(c if c.udp_port else replace(c, udp_port=COLLECTOR_UDP_PORT)
                         for c in map(parse_collector, args.standby_collector))
        opts = IntentOptions(sink_mode=SinkMode(args.sink_mode),
                             collector=CollectorSpec(host=args.collector_host) if args.collector_host else None,
                             standby_collectors=standbys)
        desired = compute_intent(topo, opts)
        schema = Schema.from_p4info(load_pipeline(target="softswitch",
                                                  program=args.program or default_program()).p4info)
        chosen = args.switch or topo.switch_names
        for name in chosen:
            if name not in desired:
                print(f"controller entries: switch {name!r} not in the topology {topo.switch_names}",
                      file=sys.stderr)
                return 2
            st = desired[name]
            print(f"# {name}: {len(st.entries)} entries, {len(st.clone_sessions)} clone session(s)")
            for e in st.entries:
                print(format_entry(schema, entry_to_proto(schema, e)))
            for cs in st.clone_sessions:
                print(f"clone session {cs.session_id} -> ports {[p for p, _ in cs.replicas]}")
    except (TopologyError, IntentError, P4rtError, RunError, OSError) as exc:
        print(f"controller entries: {exc}", file=sys.stderr)
        return 2
    return 0
