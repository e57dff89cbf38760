"""``python -m controller entries --topology FILE [--switch NAME]``: the entries the
controller would write, without any switch (a dry run of the intent).

examples:
  python -m controller entries --topology mininet_topos/topofiles/leaf_spine.yaml --switch s3
  python -m controller entries --topology dumbbell.yaml --sink-mode report --collector-host h5
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
    p.set_defaults(func=entries)


def entries(args: argparse.Namespace) -> int:
    from controller.intent import (
        CollectorSpec,
        IntentError,
        IntentOptions,
        SinkMode,
        compute_intent,
    )
    from controller.p4rt import P4rtError, Schema, entry_to_proto, format_entry, load_pipeline
    from controller.runner.config import default_program
    from controller.topology import TopologyError, load_topology
    try:
        topo = load_topology(args.topology)
        opts = IntentOptions(sink_mode=SinkMode(args.sink_mode),
                             collector=CollectorSpec(host=args.collector_host) if args.collector_host else None)
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
    except (TopologyError, IntentError, P4rtError, OSError) as exc:
        print(f"controller entries: {exc}", file=sys.stderr)
        return 2
    return 0
