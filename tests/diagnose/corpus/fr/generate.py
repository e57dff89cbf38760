"""Provenance of the flight-recorder fixtures in this folder (NOT run by the tests).

Writes each scenario's dumps with PyTorch's own dump functions
(``torch._C._distributed_c10d._dump_fr_trace`` for the pickle,
``_dump_fr_trace_json`` for the JSON) from 4 real gloo ranks on loopback, the flight
recorder on (``TORCH_FR_BUFFER_SIZE``).  Run with a venv that has torch (never the
project's own)::

    /usr/bin/python3 -m venv /work/torchvenv && /work/torchvenv/bin/pip install torch==2.13.0
    /work/torchvenv/bin/python tests/diagnose/corpus/fr/generate.py tests/diagnose/corpus/fr

Each rank (4, or ``WORLDS``) runs ``STEPS`` all-reduces of 4 floats; the scenario changes one rank's
collective at step ``AT`` (1-based, the flight recorder's ``collective_seq_id``).
Ranks whose collective times out (gloo: a few seconds) dump in the exception handler;
the odd rank dumps after waiting as long.  Every process ends with ``os._exit`` (a
hung gloo group cannot be destroyed).
"""
from __future__ import annotations

import datetime
import os
import sys
import time
from pathlib import Path

import torch
import torch._C._distributed_c10d as c10d
import torch.distributed as dist
import torch.multiprocessing as mp

WORLD, STEPS, AT, TIMEOUT_S = 4, 6, 4, 3
SCENARIOS = {
    # name: (odd rank, what it does at step AT)
    "ok": (None, None),
    "missing_rank": (2, "skip"),          # rank 2 never enters collective AT
    "stuck_broadcast": (1, "broadcast"),  # rank 1 in BROADCAST, the others in ALLREDUCE
    "size_mismatch": (3, "size"),         # rank 3 reduces 8 floats, the others 4
    "dtype_mismatch": (0, "dtype"),       # rank 0 reduces doubles
    "empty_rank": (3, "none"),            # rank 3 never enters any collective
    "stuck_allgather": (0, "allgather"),  # rank 0 in ALLGATHER, the others in ALLREDUCE
    "early_skip": (1, "skip_early"),      # rank 1 skips collective 2 of 6
    # a sub-group of ranks 0, 2, 3 reduces after each step; rank 3 skips its collective
    # AT there: 0 and 2 wait in it, rank 1 (not a member) waits in the next default one
    "subgroup_missing": (3, "subgroup"),
    # fault-free, with point-to-point: each step sends to the next rank, receives from
    # the previous one (isend / irecv), then all-reduces
    "p2p_ok": (None, "p2p"),
    # slow but not hung: rank 2 enters collectives 3 and 4 a second late (within the
    # timeout), everything completes
    "late_rank": (2, "late"),
    # 8 ranks: rank 5 never enters collective 4
    "missing_rank_8": (5, "skip"),
}
WORLDS = {"missing_rank_8": 8}   # (others: WORLD)


def _dump(out: Path, rank: int) -> None:
    (out / f"trace_rank_{rank}").write_bytes(c10d._dump_fr_trace(True, False, False))
    (out / f"trace_rank_{rank}.json").write_bytes(c10d._dump_fr_trace_json(True, False))


def _rank(rank: int, name: str, out: str, port: int) -> None:
    odd, what = SCENARIOS[name]
    world = WORLDS.get(name, WORLD)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=TIMEOUT_S))
    sub = dist.new_group([0, 2, 3]) if what == "subgroup" else None
    try:
        if rank == odd and what == "none":
            time.sleep(TIMEOUT_S + 2)
        else:
            for step in range(1, STEPS + 1):
                t = torch.ones(4)
                if rank == odd and what == "skip_early" and step == 2:
                    time.sleep(TIMEOUT_S + 2)
                    break
                if what == "late" and rank == odd and step in (3, 4):
                    time.sleep(1)
                if what == "p2p":
                    got = torch.zeros(4)
                    reqs = [dist.isend(t, (rank + 1) % world),
                            dist.irecv(got, (rank - 1) % world)]
                    for req in reqs:
                        req.wait()
                    dist.all_reduce(t)
                    continue
                if what == "subgroup":
                    dist.all_reduce(t)
                    if rank in (0, 2, 3):
                        if rank == odd and step == AT:
                            time.sleep(TIMEOUT_S + 2)
                            break
                        dist.all_reduce(t, group=sub)
                    continue
                if rank == odd and step == AT:
                    if what == "skip":
                        time.sleep(TIMEOUT_S + 2)
                        break
                    if what == "broadcast":
                        dist.broadcast(t, src=1)
                        continue
                    if what == "allgather":
                        dist.all_gather([torch.zeros(4) for _ in range(world)], t)
                        continue
                    if what == "size":
                        t = torch.ones(8)
                    if what == "dtype":
                        t = torch.ones(4, dtype=torch.float64)
                if step == AT and what in ("size", "dtype"):
                    # gloo aborts the process that receives a message of the wrong
                    # size: dump while the collective is outstanding (as the watchdog
                    # would at its timeout), the odd rank a second after the others
                    if rank == odd:
                        time.sleep(1)
                    dist.all_reduce(t, async_op=True)
                    break
                dist.all_reduce(t)
    except Exception as exc:  # noqa: BLE001 - the collective timed out (or gloo saw the mismatch)
        print(f"rank {rank}: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
    _dump(Path(out), rank)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    os.environ["TORCH_FR_BUFFER_SIZE"] = "2000"
    only = sys.argv[2:]   # scenario names (default: all)
    for i, name in enumerate(SCENARIOS):
        if only and name not in only:
            continue
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=_rank, args=(r, name, str(out), 29640 + i))
                 for r in range(WORLDS.get(name, WORLD))]
        for p in procs:
            p.start()
        for p in procs:   # (a rank gloo aborted has dumped before the abort)
            p.join()
        print(name, sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main()
