"""The readers of library logs on lines as the libraries and launchers write them:
launcher prefixes, WARN and watchdog lines, interleaved lines, NCCL 2.26 local-time
stamps, flight-recorder dumps of both backends and every state, empty ranks; every
line read or counted as rejected with its reason."""
from __future__ import annotations

import json
import pickle
from datetime import timedelta, timezone
from pathlib import Path

from traffic.collog.flight_recorder import read_flight_recorder
from traffic.collog.nccl import read_nccl, read_nccl_text

CORPUS = Path(__file__).resolve().parents[1] / "diagnose" / "corpus"
COLL = ("AllReduce: opCount {oc} sendbuff 0x1 recvbuff 0x1 count 4 datatype 7 op 0 root 0 "
        "comm 0xabc [nranks=4] stream 0x2")


def test_launcher_prefixes_give_rank_and_host() -> None:
    text = "\n".join([
        f"(RayTrainWorker pid=615, ip=10.0.0.7) w7:615:900 [2] NCCL INFO {COLL.format(oc='1a')}",
        f"[rank3]:w3:11:12 [0] NCCL INFO {COLL.format(oc='2')}",
        f"[1,2]<stdout>:w2:11:12 [0] NCCL INFO {COLL.format(oc='3')}",
        f"[1] w1:11:12 [0] NCCL INFO {COLL.format(oc='4')}",
        f"w0:11:12 [0] NCCL INFO [2] {COLL.format(oc='5')}",
    ])
    res = read_nccl_text(text, rank_map={"w7": 7, "w0:11": 0})
    assert [(r.rank, r.host, r.seq) for r in res.records] == [
        (7, "10.0.0.7", 26), (3, "w3", 2), (2, "w2", 3), (1, "w1", 4), (0, "w0", 5)]
    assert all(r.start == 0.0 for r in res.records)   # a [N] label is no timestamp
    assert res.accounted == res.lines == 5 and not res.rejected


def test_ranks_keyed_by_host_and_process_not_pointer() -> None:
    """Two hosts print the same communicator pointer with different ranks."""
    text = "\n".join([
        "a:1:1 [0] NCCL INFO comm 0xabc rank 0 nranks 4 cudaDev 0 busId 1 commId 0x77 - Init COMPLETE",
        "b:1:1 [0] NCCL INFO comm 0xabc rank 1 nranks 4 cudaDev 0 busId 1 commId 0x77 - Init COMPLETE",
        f"b:1:1 [0] NCCL INFO {COLL.format(oc='0')}",
        f"a:1:1 [0] NCCL INFO {COLL.format(oc='0')}",
    ])
    res = read_nccl_text(text)
    assert [(r.rank, r.host, r.comm) for r in res.records] == [(1, "b", "0x77"), (0, "a", "0x77")]
    assert res.read["init"] == 2


def test_warn_lines_name_the_peer_and_2_26_stamps_are_local_time() -> None:
    text = "\n".join([  # noqa: FLY002
        ("w0:34:39 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
         "10.1.2.3<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)"),
        "w0:34:39 [0] NCCL WARN NET/IB : Got completion with error 12, opcode 0, len 0",
        ("[2025-03-10 12:34:56] w0:34:39 [0] misc/socket.cc:49 NCCL WARN socketProgress: "
         "Connection closed by remote peer node2<42830>"),
        ("w0:34:39 [0] init.cc:1 NCCL WARN Your program may be hanging, this may be caused "
         "by a collective mismatch around rank 3."),
        "w0:34:39 [0] NCCL WARN something else",
    ])
    res = read_nccl_text(text, rank=5, tz=timezone(timedelta(hours=8)))
    kinds = [(e.kind, e.peer_host, e.peer_port, e.status, e.peer_rank) for e in res.events]
    assert kinds == [("net_error", "10.1.2.3", 54862, 12, None), ("net_error", "", None, 12, None),
                     ("socket_error", "node2", 42830, None, None),
                     ("mismatch_hint", "", None, None, 3), ("warn", "", None, None, None)]
    assert all(e.rank == 5 and e.host == "w0" for e in res.events)
    assert res.events[2].t == 1741581296.0   # 12:34:56 at +08:00
    assert res.lines == res.accounted == 5


def test_watchdog_lines_old_and_new() -> None:
    text = "\n".join([  # noqa: FLY002
        ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught "
         "collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=98, "
         "NumelOut=98, Timeout(ms)=600000) ran for 600020 milliseconds before timing out."),
        ("[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
         "0(default_pg) Rank 1] Exception (either an error or timeout) detected by watchdog at "
         "work: 808, last enqueued NCCL work: 811, last completed NCCL work: 807."),
        ("[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: "
         "WorkNCCL(SeqNum=469508, OpType=_REDUCE_SCATTER_BASE, Timeout(ms)=1800000) ran for "
         "1802212 milliseconds before timing out."),
        "[rank0]:[W ProcessGroupNCCL.cpp:1] ProcessGroupNCCL destructor",
        "Epoch 0: 6%|██ loss=2.6",
    ])
    res = read_nccl_text(text)
    got = [(e.kind, e.rank, e.seq, e.op, e.last_enqueued) for e in res.events]
    assert got == [("watchdog", 1, 808, "allreduce", None),
                   ("watchdog_progress", 1, 808, "", 811),
                   ("watchdog", 3, 469508, "reducescatterbase", None)]
    assert res.read["pytorch"] == 1
    assert res.rejected == ["<text>:5: not an NCCL or PyTorch distributed line"]


def test_interleaved_and_prefixless_lines() -> None:
    text = "\n".join([  # noqa: FLY002
        ("lf:32619:32711 [2] NCCL INFO lf:32629:32629 [7] NCCL INFO comm 0x1 rank 7 nranks 8 "
         "cudaDev 7 busId 1 - Init COMPLETE"),
        ("lf:32619:32711 [2] NCCL INFO lf:32629:32629 [7] NCCL INFO Broadcast: opCount 0 "
         "sendbuff 0x1 recvbuff 0x1 count 53 datatype 4 op 0 root 0 comm 0x1 [nranks=8] stream 0x5"),
        ("Broadcast: opCount 1 sendbuff 0x1 recvbuff 0x1 count 2 datatype 6 op 0 root 0 comm 0x1 "
         "[nranks=8] stream 0x5"),
        "   ",
    ])
    res = read_nccl_text(text)
    assert [(r.rank, r.host, r.op, r.bytes, r.dtype) for r in res.records] == [
        (7, "lf", "broadcast", 53 * 8, "int64")]
    assert res.rejected == ["<text>:3: collective line without NCCL's host:pid:tid [dev] prefix"]
    assert res.read["blank"] == 1 and res.accounted == res.lines == 4


def test_unreadable_file_is_one_clear_error(tmp_path: Path) -> None:
    import pytest

    from traffic.collog import CollogError
    with pytest.raises(CollogError, match="No such file"):
        read_nccl(tmp_path / "none.log")
    (tmp_path / "bin.log").write_bytes(bytes(range(256)) * 4)
    res = read_nccl(tmp_path / "bin.log")
    assert res.accounted == res.lines and not res.records


def _nccl_entry(seq: int, state: str, **kw: object) -> dict:
    e = {"record_id": seq, "pg_id": 0, "process_group": ["0", "default_pg"],
         "collective_seq_id": seq, "p2p_seq_id": 0, "profiling_name": "nccl:all_reduce",
         "time_created_ns": 10**18 + seq, "input_sizes": [[4]], "input_dtypes": ["Float"],
         "state": state, "time_discovered_started_ns": 10**18 + seq + 1 if state != "scheduled"
         else None, "time_discovered_completed_ns": 10**18 + seq + 2 if state == "completed"
         else None, "retired": state == "completed", "timeout_ms": 1000, "is_p2p": False}
    e.update(kw)
    return e


def test_flight_recorder_states_backends_and_empty_ranks(tmp_path: Path) -> None:
    d = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                "ranks": "[0, 1, 2]"}},
         "entries": [_nccl_entry(1, "completed"), _nccl_entry(2, "started"),
                     _nccl_entry(3, "scheduled")]}
    (tmp_path / "nccl_trace_rank_2").write_bytes(pickle.dumps(d))
    res = read_flight_recorder(tmp_path / "nccl_trace_rank_2", host="h2")
    assert [(r.rank, r.seq, r.state, r.end is None, r.host) for r in res.records] == [
        (2, 1, "completed", False, "h2"), (2, 2, "started", True, "h2"),
        (2, 3, "scheduled", True, "h2")]
    assert res.members["default_pg"] == [0, 1, 2] and res.ranks == {2}
    old = _nccl_entry(4, "completed")
    old["seq_id"] = old.pop("collective_seq_id")   # as dumps before PyTorch 2.4 name it
    (tmp_path / "old_trace_5").write_bytes(pickle.dumps({"entries": [old]}))
    assert [r.seq for r in read_flight_recorder(tmp_path / "old_trace_5").records] == [4]
    # an empty rank: PyTorch leaves 'entries' out of the JSON
    (tmp_path / "t.json").write_text(json.dumps({"version": "2.10", "pg_config": {}}))
    res = read_flight_recorder(tmp_path / "t.json", rank=4)
    assert res.records == [] and res.ranks == {4} and res.lines == 0


def test_real_gloo_dumps_of_torch_2_13() -> None:
    """Dumps written by real PyTorch 2.13 (gloo; corpus/fr/generate.py): pickle and
    JSON read alike; gloo's never-updated state is "unknown"; rank 3's empty dump."""
    base = CORPUS / "fr" / "empty_rank"
    for rank in range(4):
        a = read_flight_recorder(base / f"trace_rank_{rank}")
        b = read_flight_recorder(base / f"trace_rank_{rank}.json")
        key = [(r.rank, r.seq, r.op, r.bytes, r.dtype, r.state) for r in a.records]
        assert key == [(r.rank, r.seq, r.op, r.bytes, r.dtype, r.state) for r in b.records]
        assert key == ([] if rank == 3 else [(rank, 1, "allreduce", 16, "Float", "")])
        assert a.members["default_pg"] == [0, 1, 2, 3]


def test_gloo_errors_name_the_peer() -> None:
    """As real gloo (PyTorch 2.13) words them, behind torchrun's prefix."""
    text = "\n".join([  # noqa: FLY002
        ("[rank0]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
         "pair.cc:553] Connection closed by peer [127.0.0.1]:60572"),
        ("[rank1]: RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/"
         "unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation to complete"),
    ])
    res = read_nccl_text(text)
    assert [(e.kind, e.rank, e.peer_host, e.peer_port) for e in res.events] == [
        ("socket_error", 0, "127.0.0.1", 60572)]
    assert res.read["pytorch"] == 1 and res.accounted == res.lines == 2
