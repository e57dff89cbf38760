"""Collective logs: the writer's bound, the test bed's logs from a real loopback run,
and the readers of NCCL INFO lines and PyTorch flight-recorder dumps (samples written
from their documented formats)."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from traffic.collog import CollectiveLogWriter, CollogError, CollRecord, read_log, read_logs
from traffic.collog.flight_recorder import read_flight_recorder
from traffic.collog.nccl import read_nccl

ROOT = Path(__file__).resolve().parents[2]


def _rec(**kw: object) -> CollRecord:
    base: dict = {"rank": 0, "comm": "c", "op": "allreduce", "seq": 0, "start": 10.0, "end": 11.0}
    base.update(kw)
    return CollRecord(**base)


def test_writer_rotates_and_stays_bounded(tmp_path: Path) -> None:
    w = CollectiveLogWriter(tmp_path, 3, max_bytes=4096, backups=2)
    for i in range(500):
        w.write(_rec(rank=3, seq=i))
    w.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["rank3.jsonl", "rank3.jsonl.1", "rank3.jsonl.2"]
    assert all(p.stat().st_size <= 4096 for p in tmp_path.iterdir())
    recs = read_logs([tmp_path])
    assert w.records == 500 and 0 < len(recs) < 500
    assert max(r.seq for r in recs) == 499  # the newest records are kept


def test_record_round_trip_and_bad_lines(tmp_path: Path) -> None:
    r = _rec(dir="send", peer=1, qpn=0x10100, retx=2, rate_changes=[[10.5, 5e7]], srtt=0.0021)
    assert CollRecord.from_dict(json.loads(r.to_json()), "x") == r
    f = tmp_path / "rank0.jsonl"
    f.write_text(r.to_json() + "\n" + '{"rank": 0, "comm": "c", "op": "x"}\n')
    with pytest.raises(CollogError, match=r"rank0.jsonl:2: missing field 'seq'"):
        read_log(f)
    f.write_text('{"rank": -1, "comm": "c", "op": "x", "seq": 0}\n')
    with pytest.raises(CollogError, match="rank=-1"):
        read_log(f)
    f.write_text('{"rank": 0, "comm": "c", "op": "x", "seq": 0, "dir": "sideways"}\n')
    with pytest.raises(CollogError, match="dir='sideways'"):
        read_log(f)
    f.write_text('{"rank": 0, "comm": "c", "op": "x", "seq": 0, "srtt": -0.5}\n')
    with pytest.raises(CollogError, match="srtt=-0.5 must be a number >= 0 or null"):
        read_log(f)
    f.write_text("not json\n")
    with pytest.raises(CollogError, match=":1: not JSON"):
        read_log(f)


def test_loopback_allreduce_writes_every_step_of_every_rank(tmp_path: Path) -> None:
    """Three real rank processes on loopback: each logs 2(N-1) steps x 2 iterations of
    sends and receives, in order, with the ring's peers and Unix times."""
    logs = tmp_path / "logs"
    out = subprocess.run([sys.executable, "-m", "traffic", "local", "allreduce", "-n", "3",
                          "-s", "48K", "-c", "2", "--rate", "50M", "--coll-log", str(logs),
                          "-O", str(tmp_path / "sum"), "--timeout", "30"],
                         cwd=ROOT, capture_output=True, text=True, timeout=90, check=False)
    assert out.returncode == 0, out.stderr
    recs = read_logs([logs])
    assert {p.name for p in logs.iterdir()} == {"rank0.jsonl", "rank1.jsonl", "rank2.jsonl"}
    for rank in range(3):
        sends = [r for r in recs if r.rank == rank and r.dir == "send"]
        recvs = [r for r in recs if r.rank == rank and r.dir == "recv"]
        assert sorted((r.seq, r.step) for r in sends) == [(i, s) for i in range(2)
                                                          for s in range(4)]
        assert len(recvs) == 8
        assert {r.peer for r in sends} == {(rank + 1) % 3}
        assert {r.peer for r in recvs} == {(rank - 1) % 3}
        assert all(r.end is not None and r.end >= r.start > 1.6e9 for r in sends + recvs)
        assert {r.qpn for r in sends} == {rank << 16 | ((rank + 1) % 3) << 8}
        # each send carries its QP's smoothed round trip (the diagnosis' slow-receiver
        # evidence); a receive has none
        assert all(r.srtt is not None and 0 < r.srtt < 1.0 for r in sends)
        assert all(r.srtt is None for r in recvs)
        assert all(r.op == "allreduce" and r.comm == "allreduce-3" for r in recs)


NCCL_SAMPLE = """\
node1:4321:4321 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>
node1:4321:4321 [0] NCCL INFO comm 0x55d0c0a0 rank 2 nranks 4 cudaDev 0 nvmlDev 0 busId 1000 commId 0x7a3e - Init COMPLETE
node1:4321:4321 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x7f10 recvbuff 0x7f10 count 1048576 datatype 7 op 0 root 0 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x7f10 recvbuff 0x7f10 count 512 datatype 9 op 0 root 0 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO AllGather: opCount a sendbuff 0x7f10 recvbuff 0x7f20 count 16 datatype 4 op 0 root 0 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO Send: opCount b sendbuff 0x7f10 recvbuff (nil) count 8 datatype 0 op 0 root 3 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO AllReduce: opCount c sendbuff 0x7f10 recvbuff 0x7f10 count 8 datatype 42 op 0 root 0 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO AllReduce: opCount d sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0x99 [nranks=4] stream 0x55e0
node1:4321:4321 [0] NCCL INFO AllReduce: opCount zz garbage
[2026-01-05 10:00:01.250] node1:4321:4321 [0] NCCL INFO AllReduce: opCount e sendbuff 0x7f10 recvbuff 0x7f10 count 4 datatype 7 op 0 root 0 comm 0x55d0c0a0 [nranks=4] stream 0x55e0
"""


def test_nccl_info_lines(tmp_path: Path) -> None:
    f = tmp_path / "nccl.log"
    f.write_text(NCCL_SAMPLE)
    from datetime import UTC
    log = read_nccl(f, tz=UTC)
    got = [(r.rank, r.op, r.seq, r.bytes, r.dir, r.peer) for r in log.records]
    assert got == [(2, "allreduce", 0, 4 << 20, "op", None), (2, "allreduce", 1, 1024, "op", None),
                   (2, "allgather", 10, 128, "op", None), (2, "send", 11, 8, "send", 3),
                   (2, "allreduce", 14, 16, "op", None)]
    assert log.records[-1].start == pytest.approx(1767607201.25)
    assert all(r.source == "nccl" and r.end is None and r.host == "node1" for r in log.records)
    assert [x.split(": ", 1)[1].split(" (")[0] for x in log.rejected] == [
        "unknown datatype", "rank unknown", "collective line not understood"]
    assert log.rejected[0].endswith("nccl.log:7: unknown datatype (42)")
    assert "comm 0x99 of node1:4321" in log.rejected[1]
    assert log.accounted == log.lines == len(NCCL_SAMPLE.splitlines())


def _fr_dump() -> dict:
    entry = {"frames": [{"name": "train", "filename": "train.py", "line": 12}],
             "record_id": 0, "pg_id": 0, "process_group": ("0", "default_pg"),
             "collective_seq_id": 1, "p2p_seq_id": 0, "op_id": 1,
             "profiling_name": "nccl:all_reduce", "time_created_ns": 1_724_779_239_936_775_119,
             "input_sizes": [[3, 4]], "input_dtypes": ["Float"], "output_sizes": [[3, 4]],
             "output_dtypes": ["Float"], "state": "completed",
             "time_discovered_started_ns": None,
             "time_discovered_completed_ns": 1_724_779_239_975_811_724, "retired": True,
             "timeout_ms": 600000, "is_p2p": False}
    hung = dict(entry, record_id=1, collective_seq_id=2, state="started",
                time_discovered_started_ns=1_724_779_240_000_000_000,
                time_discovered_completed_ns=None, input_sizes=[[1024]],
                input_dtypes=["BFloat16"], profiling_name="nccl:reduce_scatter")
    return {"version": "2.5", "pg_config": {"0": {"name": "0", "desc": "default_pg",
                                                  "ranks": "[0, 1]"}},
            "pg_status": {"0": {"last_enqueued_collective": 2, "last_started_collective": 2,
                                "last_completed_collective": 1}},
            "entries": [entry, hung]}


def test_flight_recorder_pickle_and_json(tmp_path: Path) -> None:
    (tmp_path / "trace_1").write_bytes(pickle.dumps(_fr_dump()))
    d = _fr_dump()
    d["rank"] = 0
    (tmp_path / "dump.json").write_text(json.dumps(d))
    a = read_flight_recorder(tmp_path / "trace_1").records
    b = read_flight_recorder(tmp_path / "dump.json").records
    assert [(r.rank, r.op, r.seq, r.bytes, r.comm) for r in a] == [
        (1, "allreduce", 1, 48, "default_pg"), (1, "reducescatter", 2, 2048, "default_pg")]
    assert a[0].start == pytest.approx(1724779239.936775) and a[0].end == pytest.approx(
        1724779239.975812)
    assert a[1].end is None and a[1].start == pytest.approx(1724779240.0)
    assert [r.rank for r in b] == [0, 0]


def test_flight_recorder_refuses_code_and_bad_entries(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (print, ("owned",))
    (tmp_path / "trace_0").write_bytes(pickle.dumps({"entries": [Evil()]}))
    with pytest.raises(CollogError, match=r"refers to builtins.print"):
        read_flight_recorder(tmp_path / "trace_0")
    d = _fr_dump()
    d["entries"][0]["state"] = "lost"
    (tmp_path / "trace_2").write_text(json.dumps(d))
    res = read_flight_recorder(tmp_path / "trace_2")
    assert res.rejected == ["{}: entry with an unknown state ('lost')".format(
        f"{tmp_path / 'trace_2'} entry 0")]
    assert [r.seq for r in res.records] == [2] and res.accounted == res.lines == 2
    del d["entries"][0]["collective_seq_id"]
    (tmp_path / "trace_3").write_text(json.dumps(d))
    res = read_flight_recorder(tmp_path / "trace_3")
    assert res.rejected[0].endswith("entry 0: entry without a field (collective_seq_id)")
    (tmp_path / "trace_4").write_bytes(b"\x80\x04garbage")
    with pytest.raises(CollogError, match="trace_4: not a flight-recorder dump"):
        read_flight_recorder(tmp_path / "trace_4")


def test_injected_straggler_posts_late_and_the_result_stays_right(tmp_path: Path) -> None:
    """Rank 1 of a real loopback ring posts every step 0.3 s late from its start: the
    all-reduce still sums correctly, and the logs show rank 1 (only) as late."""
    import time

    from controller.diagnose.transfers import analyse
    hosts = "127.78.3.10,127.78.3.11,127.78.3.12"
    start = time.time() + 2.0
    procs = [subprocess.Popen(
        [sys.executable, "-m", "traffic", "allreduce", "--hosts", hosts, "--rank", str(r),
         "-s", "48K", "-c", "6", "--rate", "50M", "--start-at", f"{start:.3f}",
         "--coll-log", str(tmp_path), "--timeout", "40",
         *(["--fault-straggle", f"{start}:60:0.3"] if r == 1 else [])],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for r in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["result_ok"] is True
    recs = read_logs([tmp_path])
    view = analyse(recs, max(r.end or r.start for r in recs))
    assert set(view.late) == {1} and len(view.late[1]) >= 10
    assert all(gap >= 0.25 for _, gap in view.late[1])
