"""``python -m controller diagnose --out DIR``: name the fault behind a slow collective.

Reads the ranks' collective logs (DIR/collectives/rank<N>.jsonl unless --logs; NCCL
INFO logs with --nccl, PyTorch flight-recorder dumps with --flight-recorder), the
controller's exported telemetry under DIR and the topology (--topology, else
DIR/topology.yaml), prints the ranked culprits (or "no fault"), puts them under
"diagnosis" in DIR/summary.json and draws DIR/diagnosis.png.

examples:
  python -m controller diagnose --out results/fault1
  python -m controller diagnose --out out/ --topology mininet_topos/topofiles/two_dc.yaml \\
      --logs run/collectives --json
  python -m controller diagnose --out out/ --topology topo.yaml --nccl rank0.log --nccl rank1.log
  python -m controller diagnose --out out/ --flight-recorder dumps/ --rank-map 0=h1,1=h2
  python -m controller diagnose --out out/ --nccl worker.log@3 --nccl merged.log \
      --rank-map 0=node1:4321,1=node2:4410 --log-tz +08:00

Library logs: each --nccl FILE (NCCL_DEBUG=INFO output, with or without launcher
prefixes, one process's or merged; PyTorch watchdog lines in it are read too) and each
--flight-recorder FILE or DIR (PyTorch dumps, pickle or JSON) takes an optional @RANK
for files whose lines do not say their rank.  --rank-map RANK=HOST[:PID] says which
process is which rank where the log does not (and gives flight-recorder ranks a host).
Every line is read or counted as rejected with its reason; the account is printed
(stderr; under "inputs" with --json).  Without a topology file (and without --topology)
the diagnosis runs on the library logs alone.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.topology.model import Topology


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diagnose", help="rank the culprits of a slow or hung collective",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default="out", metavar="DIR",
                   help="the run's output directory (controller --out; default ./out)")
    p.add_argument("--topology", metavar="FILE", help="topology file (default DIR/topology.yaml)")
    p.add_argument("--logs", action="append", metavar="PATH",
                   help="collective log file or directory (repeatable; default DIR/collectives)")
    p.add_argument("--nccl", action="append", default=[], metavar="FILE",
                   help="an NCCL_DEBUG=INFO log; FILE@RANK gives the rank of a file whose "
                        "lines do not say it (repeatable)")
    p.add_argument("--flight-recorder", action="append", default=[], metavar="FILE",
                   help="a PyTorch flight-recorder dump, or a directory of them; FILE@RANK "
                        "gives its rank (repeatable)")
    p.add_argument("--rank-map", action="append", default=[], metavar="R=HOST[:PID],...",
                   help="which host (and process) each rank ran on, for logs that do not "
                        "say it (repeatable)")
    p.add_argument("--log-tz", metavar="TZ",
                   help="time zone of dated log timestamps: UTC, +08:00 (default: this "
                        "machine's local time, as NCCL prints its own)")
    p.add_argument("--top", type=int, default=5, help="culprits to print (default 5)")
    p.add_argument("--json", action="store_true", help="print the diagnosis as JSON")
    p.add_argument("--no-plot", action="store_true", help="do not draw DIR/diagnosis.png")
    p.add_argument("--watch", type=float, metavar="S",
                   help="live: diagnose again every S seconds while the run goes on (the "
                        "ranks and the controller keep writing), print each change of the "
                        "verdict; Ctrl-C stops")
    p.add_argument("--rounds", type=int, default=0, metavar="N",
                   help="with --watch: stop after N rounds (default: until Ctrl-C)")
    p.set_defaults(func=run_diagnose)


def locate(out: Path) -> tuple[Path | None, Path, Path]:
    """Where the telemetry, the topology and the collective logs of ``out`` are:
    ``(telemetry dir, topology file, collectives dir)``; telemetry dir None (the third
    item then says why) for a folder with nothing to diagnose as a whole.

    Layouts: a controller's ``--out`` (DIR, DIR/topology.yaml, DIR/collectives); a
    test-bed results folder of the demo or an experiment (DIR/logs/controller,
    DIR/logs/topology.yaml, DIR/collectives); one trial of ``experiment faults``
    (DIR/collectives, the test bed's files in DIR/../testbed).
    """
    if (out / "logs" / "topology.yaml").is_file():
        return out / "logs" / "controller", out / "logs" / "topology.yaml", out / "collectives"
    trials = sorted(p.name for p in out.glob("trial[0-9][0-9][0-9]") if p.is_dir())
    if trials and not (out / "collectives").is_dir():
        return None, out, Path(
            f"{out} holds {len(trials)} trials of `experiment faults`: diagnose one with "
            f"--out {out / trials[0]} (its live diagnosis: {out / trials[0] / 'diagnosis.txt'})")
    tb = out.parent / "testbed"
    if not (out / "topology.yaml").exists() and (tb / "topology.yaml").is_file():
        tel = tb / "controller" if (tb / "controller").is_dir() else out
        return tel, tb / "topology.yaml", out / "collectives"
    return out, out / "topology.yaml", out / "collectives"


def run_diagnose(args: argparse.Namespace) -> int:
    from controller.diagnose import Evidence, diagnose, load_telemetry
    from controller.diagnose.library import read_library_logs
    from controller.diagnose.report import format_diagnosis, plot_diagnosis, write_summary
    from controller.topology.errors import TopologyError
    from controller.topology.load import load_topology
    from controller.topology.model import Topology
    from traffic.collog import CollogError, read_logs

    out, default_topo, coll = locate(Path(args.out))
    if out is None:
        print(f"controller diagnose: {coll}", file=sys.stderr)
        return 2
    topo_path = Path(args.topology) if args.topology else default_topo
    library = bool(args.nccl or args.flight_recorder)
    try:
        topo = load_topology(topo_path)
    except (TopologyError, OSError) as exc:
        if args.topology or not library or topo_path.exists():
            print(f"controller diagnose: topology {topo_path}: {exc}", file=sys.stderr)
            return 2
        topo = Topology(name="none", switches=(), hosts=(), links=())
    if args.watch:
        return _watch(args, out, topo, [Path(x) for x in args.logs] if args.logs
                      else [coll])
    try:
        logs = [Path(x) for x in args.logs] if args.logs else (
            [coll] if coll.is_dir() else [])
        records = read_logs(logs)
        lib = read_library_logs(args.nccl, args.flight_recorder, rank_map=args.rank_map,
                                tz=args.log_tz)
    except CollogError as exc:
        print(f"controller diagnose: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"controller diagnose: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    for name, res in lib.accounts:
        print(f"controller diagnose: {name}: {res.summary()}", file=sys.stderr)
    total = lib.total
    records += total.records
    if not records and not total.events and not total.ranks and lib.accounts:
        why = "no collective, error or watchdog line in the library logs"
        print(json.dumps({"fault": False, "nothing_to_diagnose": why, "inputs": lib.as_dicts()},
                         indent=1) if args.json else
              f"controller diagnose: nothing to diagnose: {why} (their account is above)")
        return 0
    if not records and not total.events and not total.ranks:
        print(f"controller diagnose: no collective records (looked in "
              f"{[str(x) for x in logs or [coll]]}, --nccl, --flight-recorder; runs made "
              "before the test bed logged collectives have none)", file=sys.stderr)
        return 2
    ev = Evidence(topo=topo, records=records, telemetry=load_telemetry(out, topo),
                  events=total.events, members=total.members, ranks_seen=total.ranks)
    d = diagnose(ev)
    dest = Path(args.out)   # the summary goes where the user pointed, whatever the layout
    try:
        dest.mkdir(parents=True, exist_ok=True)
        write_summary(dest, d)
        if not args.no_plot:
            plot_diagnosis(ev, d, dest / "diagnosis.png")
    except OSError as exc:
        print(f"controller diagnose: {dest}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.json:
        doc = d.as_dict()
        if lib.accounts:
            doc["inputs"] = lib.as_dicts()
        print(json.dumps(doc, indent=1))
    else:
        print(format_diagnosis(d, top=args.top))
    return 0


def _watch(args: argparse.Namespace, out: Path, topo: Topology, logs: list[Path]) -> int:
    """Live diagnosis: re-read logs and telemetry every ``--watch`` s; print changes."""
    import time

    from controller.diagnose import Evidence, diagnose, load_telemetry
    from controller.diagnose.report import format_diagnosis, write_summary
    from traffic.collog import CollogError, read_logs

    last = None
    n = 0
    while not args.rounds or n < args.rounds:
        n += 1
        try:
            records = read_logs(logs)
        except CollogError:   # a line being written: next round
            records = []
        if records:
            ev = Evidence(topo=topo, records=records, telemetry=load_telemetry(out, topo))
            d = diagnose(ev)
            verdict = [(c.type, c.component, c.kind) for c in d.culprits[:1]]
            if verdict != last:
                print(format_diagnosis(d, top=args.top), flush=True)
                write_summary(out, d)
                last = verdict
        time.sleep(args.watch)
    return 0
