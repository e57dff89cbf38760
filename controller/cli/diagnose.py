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


def _file_rank(spec: str) -> tuple[Path, int | None]:
    """``FILE`` or ``FILE@RANK`` (a file named with an ``@`` is taken whole if it exists)."""
    path, at, rank = spec.rpartition("@")
    if at and rank.isdigit() and not Path(spec).exists():
        return Path(path), int(rank)
    return Path(spec), None


def _rank_map(specs: list[str]) -> dict[int, tuple[str, str]]:
    """``0=node1:4321,1=node2`` -> {0: ("node1", "4321"), 1: ("node2", "")}."""
    out: dict[int, tuple[str, str]] = {}
    for spec in specs:
        for item in filter(None, (x.strip() for x in spec.split(","))):
            rank, eq, where = item.partition("=")
            host, _, pid = where.partition(":") if where.count(":") == 1 else (where, "", "")
            if not eq or not rank.strip().isdigit() or not host or (pid and not pid.isdigit()):
                raise ValueError(f"--rank-map {item!r}: expected RANK=HOST or RANK=HOST:PID")
            out[int(rank)] = (host, pid)
    return out


def _tz(text: str | None):  # type: ignore[no-untyped-def]
    from datetime import UTC, timedelta, timezone
    if text is None:
        return None
    if text.upper() in ("UTC", "Z"):
        return UTC
    sign, _, rest = text[:1], None, text[1:]
    hh, _, mm = rest.partition(":")
    if sign not in "+-" or not hh.isdigit() or (mm and not mm.isdigit()):
        raise ValueError(f"--log-tz {text!r}: expected UTC or +HH:MM / -HH:MM")
    off = timedelta(hours=int(hh), minutes=int(mm or 0))
    return timezone(-off if sign == "-" else off)


def _library_logs(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Every --nccl / --flight-recorder input read, with an account per file."""
    from traffic.collog.flight_recorder import read_flight_recorder
    from traffic.collog.nccl import read_nccl
    from traffic.collog.result import ReadResult

    rmap = _rank_map(args.rank_map)
    by_proc = {f"{h}:{pid}" if pid else h: r for r, (h, pid) in rmap.items()}
    tz = _tz(args.log_tz)
    total, accounts = ReadResult(), []
    for spec in args.nccl:
        path, rank = _file_rank(spec)
        res = read_nccl(path, rank=rank, rank_map=by_proc, tz=tz)
        accounts.append((str(path), res))
        total.extend(res)
    for spec in args.flight_recorder:
        path, rank = _file_rank(spec)
        files = sorted(q for q in path.iterdir() if q.is_file()) if path.is_dir() else [path]
        for f in files:
            res = read_flight_recorder(f, rank=rank)
            for rec in res.records:
                rec.host = rec.host or rmap.get(rec.rank, ("", ""))[0]
            accounts.append((str(f), res))
            total.extend(res)
    return total, accounts


def _account(name: str, res) -> dict:  # type: ignore[no-untyped-def]
    return {"file": name, "lines": res.lines, "read": dict(res.read),
            "rejected": len(res.rejected), "reasons": dict(res.reasons),
            "examples": res.rejected[:3]}


def run_diagnose(args: argparse.Namespace) -> int:
    from controller.diagnose import Evidence, diagnose, load_telemetry
    from controller.diagnose.report import format_diagnosis, plot_diagnosis, write_summary
    from controller.topology.errors import TopologyError
    from controller.topology.load import load_topology
    from controller.topology.model import Topology
    from traffic.collog import CollogError, read_logs

    out = Path(args.out)
    topo_path = Path(args.topology) if args.topology else out / "topology.yaml"
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
                      else [out / "collectives"])
    try:
        logs = [Path(x) for x in args.logs] if args.logs else (
            [out / "collectives"] if (out / "collectives").is_dir() else [])
        records = read_logs(logs)
        lib, accounts = _library_logs(args)
    except (CollogError, ValueError) as exc:
        print(f"controller diagnose: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"controller diagnose: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    for name, res in accounts:
        print(f"controller diagnose: {name}: {res.summary()}", file=sys.stderr)
    records += lib.records
    if not records and not lib.events and not lib.ranks:
        print(f"controller diagnose: no collective records (looked in {[str(x) for x in logs]}"
              ", --nccl, --flight-recorder)", file=sys.stderr)
        return 2
    ev = Evidence(topo=topo, records=records, telemetry=load_telemetry(out, topo),
                  events=lib.events, members=lib.members, ranks_seen=lib.ranks)
    d = diagnose(ev)
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_summary(out, d)
        if not args.no_plot:
            plot_diagnosis(ev, d, out / "diagnosis.png")
    except OSError as exc:
        print(f"controller diagnose: {out}: {exc.strerror}", file=sys.stderr)
        return 2
    if args.json:
        doc = d.as_dict()
        if accounts:
            doc["inputs"] = [_account(n, r) for n, r in accounts]
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
