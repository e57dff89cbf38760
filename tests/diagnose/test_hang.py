"""Hangs and mismatches across ranks from library logs: the rank the others wait for
first; NET errors naming a peer joined with the topology and telemetry."""
from __future__ import annotations

from pathlib import Path

from controller.diagnose import Evidence, diagnose
from controller.diagnose.synth import SynthFault, synth_ring
from controller.topology.load import load_topology
from controller.topology.model import Topology
from traffic.collog.records import CollRecord
from traffic.collog.result import CollEvent

ROOT = Path(__file__).resolve().parents[2]
TOPO = load_topology(ROOT / "mininet_topos" / "topofiles" / "two_dc.yaml")
NONE = Topology(name="none", switches=(), hosts=(), links=())


def _op(rank: int, seq: int, op: str = "allreduce", *, state: str = "", nbytes: int = 16,
        dtype: str = "Float", source: str = "flight_recorder", host: str = "") -> CollRecord:
    return CollRecord(rank=rank, comm="default_pg", op=op, seq=seq, bytes=nbytes,
                      dtype=dtype, state=state, start=100.0 + seq, end=None, source=source,
                      host=host or f"node{rank}")


def _top(ev: Evidence) -> tuple[str, str, str]:
    d = diagnose(ev)
    assert d.fault, d.as_dict()
    c = d.culprits[0]
    return c.type, c.component, c.kind


def test_nccl_dump_states_name_the_rank_stuck_before_the_collective() -> None:
    """NCCL-backend dumps: at seq 3 ranks 0, 1, 3 have started, rank 2 only scheduled
    (its stream is busy elsewhere): rank 2, with its host."""
    recs = [_op(r, s, state="completed") for r in range(4) for s in (1, 2)]
    recs += [_op(r, 3, state="scheduled" if r == 2 else "started") for r in range(4)]
    d = diagnose(Evidence(topo=NONE, records=recs))
    top = d.culprits[0]
    assert (top.type, top.component, top.kind) == ("rank", "2", "stuck_in_collective")
    assert top.evidence["host"] == "node2" and top.evidence["seq"] == 3
    assert d.collective["default_pg"]["stuck_seq"] == 3


def test_every_rank_inside_the_same_collective_blames_no_rank() -> None:
    recs = [_op(r, 1, state="completed") for r in range(3)]
    recs += [_op(r, 2, state="started") for r in range(3)]
    assert _top(Evidence(topo=NONE, records=recs)) == ("comm", "default_pg",
                                                        "stuck_in_collective")


def test_fault_free_dumps_and_completed_laggards() -> None:
    recs = [_op(r, s, state="completed") for r in range(4) for s in (1, 2, 3)]
    assert not diagnose(Evidence(topo=NONE, records=recs)).fault
    # rank 1's dump is older, but the others completed what it lacks: no hang
    recs = [x for x in recs if not (x.rank == 1 and x.seq == 3)]
    assert not diagnose(Evidence(topo=NONE, records=recs)).fault


def test_nccl_lines_mismatch_and_missing_rank() -> None:
    recs = [_op(r, s, source="nccl", dtype="float32") for r in range(4) for s in range(5)]
    recs[4 * 5 - 1] = _op(3, 4, "allgather", source="nccl", dtype="float32")
    assert _top(Evidence(topo=NONE, records=recs)) == ("rank", "3", "collective_mismatch")
    recs = [_op(r, s, source="nccl") for r in range(4) for s in range(5 if r != 1 else 3)]
    d = diagnose(Evidence(topo=NONE, records=recs))
    assert (d.culprits[0].component, d.culprits[0].kind) == ("1", "missing_collective")
    assert d.culprits[0].evidence["never_reached_seq"] == 3


def test_watchdog_lines_name_the_rank_that_never_enqueued() -> None:
    evs = [CollEvent(kind="watchdog", rank=r, seq=808, op="allreduce") for r in (0, 1, 3)]
    evs += [CollEvent(kind="watchdog_progress", rank=r, seq=808, last_enqueued=811)
            for r in (0, 1, 3)]
    evs.append(CollEvent(kind="watchdog_progress", rank=2, seq=807, last_enqueued=807))
    assert _top(Evidence(topo=NONE, records=[], events=evs)) == (
        "rank", "2", "missing_collective")
    # no progress lines: the rank that printed no timeout
    evs = [CollEvent(kind="watchdog", rank=r, seq=808, op="allreduce") for r in (0, 1, 3)]
    assert _top(Evidence(topo=NONE, records=[], events=evs)) == (
        "rank", "2", "missing_collective")


def test_peer_errors_name_the_path_or_the_peer() -> None:
    evs = [CollEvent(kind="net_error", host="w0", rank=0, status=12, peer_host="10.0.0.9",
                     peer_port=5, where="a.log:3")]
    d = diagnose(Evidence(topo=NONE, records=[], events=evs))
    c = d.culprits[0]
    assert (c.type, c.component, c.kind) == ("path", "w0<->10.0.0.9", "peer_error")
    assert c.evidence["ib_status"] == {"12": "transport retry counter exceeded"}
    evs.append(CollEvent(kind="socket_error", host="w3", rank=3, peer_host="10.0.0.9",
                         peer_port=7))
    assert _top(Evidence(topo=NONE, records=[], events=evs)) == ("host", "10.0.0.9",
                                                                  "peer_error")


def test_net_error_joined_with_telemetry_names_the_link() -> None:
    """h1 logs a retry-exceeded completion error naming h5's address; the telemetry
    shows loss on one link of their path: that link, named by the error, comes first."""
    ev = synth_ring(TOPO, ["h1", "h3", "h5", "h7"],
                    SynthFault(kind="gray_loss", target="s1:3->s5:3", onset=0.6), seed=1)
    h5 = next(h.ipv4 for h in TOPO.hosts if h.name == "h5")
    recs = [CollRecord(rank=r, comm="c", op="allreduce", seq=s, start=ev.end_time - 1,
                       source="nccl", host=["h1", "h3", "h5", "h7"][r])
            for r in range(4) for s in range(3)]
    lib = Evidence(topo=TOPO, records=recs, telemetry=ev.telemetry, events=[CollEvent(
        kind="net_error", host="h1", rank=0, status=12, peer_host=h5, peer_port=1,
        where="n.log:9")])
    d = diagnose(lib)
    top = d.culprits[0]
    assert (top.type, top.component, top.kind) == ("link", "s1:3->s5:3", "gray_loss")
    assert top.evidence["named_by_error"] == f"h1 -> {h5}"


def test_point_to_point_entries_are_not_compared_across_ranks(tmp_path: Path) -> None:
    """NCCL dumps number p2p operations apart (p2p_seq_id): rank 0's send and rank 1's
    recv are one exchange, not a mismatch, and not the collectives' sequence."""
    import json

    from traffic.collog.flight_recorder import read_flight_recorder
    recs = []
    for rank, op in ((0, "send 0->1"), (1, "recv 0<-1")):
        entries = [{"collective_seq_id": s, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
                    "process_group": ["0", "default_pg"], "state": "completed",
                    "time_created_ns": 10**18 + s, "input_sizes": [[4]],
                    "input_dtypes": ["Float"], "is_p2p": False} for s in (1, 2)]
        entries.append({"collective_seq_id": 2, "p2p_seq_id": 1, "is_p2p": True,
                        "profiling_name": f"nccl:{op}", "process_group": ["0", "default_pg"],
                        "state": "completed", "time_created_ns": 10**18 + 5,
                        "input_sizes": [[8]], "input_dtypes": ["Float"]})
        f = tmp_path / f"trace_{rank}.json"
        f.write_text(json.dumps({"entries": entries}))
        recs += read_flight_recorder(f).records
    assert {r.comm for r in recs} == {"default_pg", "default_pg:p2p"}
    assert not diagnose(Evidence(topo=NONE, records=recs)).fault


def test_a_member_without_a_dump_while_the_others_wait() -> None:
    """NCCL dumps of ranks 0-2 of a 4-rank group, all started in seq 2: rank 3, whose
    dump is missing (its process died or hangs), is named above the group."""
    recs = [_op(r, 1, state="completed") for r in range(3)]
    recs += [_op(r, 2, state="started") for r in range(3)]
    d = diagnose(Evidence(topo=NONE, records=recs, members={"default_pg": [0, 1, 2, 3]},
                          ranks_seen={0, 1, 2}))
    top = d.culprits[0]
    assert (top.component, top.kind, top.evidence["no_log"]) == ("3", "missing_collective", True)
    assert d.culprits[1].type == "comm"
