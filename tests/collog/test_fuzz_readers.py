"""Fuzzing the readers of library logs (hypothesis): no input makes them (or the
diagnosis after them) raise anything but a clear CollogError, and every line or dump
entry is read or counted as rejected."""
from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.diagnose import Evidence, diagnose
from controller.diagnose.library import parse_rank_map, parse_tz
from controller.diagnose.report import format_diagnosis
from controller.topology.model import Topology
from traffic.collog import CollogError
from traffic.collog.flight_recorder import read_flight_recorder
from traffic.collog.nccl import read_nccl_text
from traffic.collog.result import ReadResult

CORPUS = Path(__file__).resolve().parents[1] / "diagnose" / "corpus"
NONE = Topology(name="none", switches=(), hosts=(), links=())
SETTINGS = settings(max_examples=300, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

# pieces of real lines, recombined: prefixes, heads, messages, numbers
PREFIX = st.sampled_from(["", "[rank3]:", "[default1]:", "[1,2]<stdout>:", "[7] ", "[12] ",
                          "(RayTrainWorker pid=61, ip=10.0.0.7) ", "(pid=5) ", "[80746] ",
                          "[2025-03-10 12:34:56] ", "[1767225600.25] ", "[9e999] ", "[nan] "])
HEAD = st.sampled_from(["n1:10:11 [0] NCCL INFO ", "n2:10:11 [3] NCCL WARN ",
                        "n1:10:11 [0] misc/socket.cc:49 NCCL WARN ", "[0] NCCL INFO ",
                        "n1:10:11 [2] NCCL INFO n2:3:4 [7] NCCL INFO ", "", "NCCL INFO "])
WORD = st.one_of(st.sampled_from(
    ["AllReduce:", "Send:", "Bcast:", "opCount", "sendbuff", "recvbuff", "count", "datatype",
     "op", "root", "comm", "[nranks=4]", "[nranks=x]", "stream", "rank", "nranks", "commId",
     "Init COMPLETE", "Got completion from peer", "10.0.0.2<555>", "with status=12",
     "with error 4,", "Connection closed by remote peer", "node1<7>", "retry counter exceeded",
     "collective mismatch around rank", "[Rank 2]", "[PG 1 Rank 0]",
     "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE,",
     "detected by watchdog at work: 5, last enqueued NCCL work: 4, last completed NCCL work: 3",
     "ProcessGroupNCCL", "0x1f", "(nil)", "-1", "99999999999999999999999", "ff"]),
    st.integers(-5, 2**70).map(str), st.text(max_size=8))
NUM = st.one_of(st.integers(-3, 12), st.integers(-2**70, 2**70)).map(str)
COLL = st.builds(
    lambda p, ts, h, op, oc, cnt, dt, root, comm, n: (
        f"{p}{ts}n{h}:1:1 [0] NCCL INFO {op}: opCount {oc} sendbuff 0x1 recvbuff 0x1 "
        f"count {cnt} datatype {dt} op 0 root {root} comm 0x{comm} [nranks={n}] stream 0x2"),
    PREFIX, st.sampled_from(["", "[1767225600.5] ", "[inf] ", "[-1e300] ", "[1e20] ",
                             "[2026-01-05 10:00:01.250] ", "[0001-01-01 00:00:00] "]),
    st.integers(0, 3), st.sampled_from(["AllReduce", "Send", "Recv", "Broadcast", "Foo"]),
    st.one_of(st.integers(0, 2**70).map(lambda x: f"{x:x}"), st.just("zz")), NUM, NUM, NUM,
    st.sampled_from(["1", "2"]), NUM)
LINE = st.one_of(st.builds(lambda p, h, ws: p + h + " ".join(ws), PREFIX, HEAD,
                           st.lists(WORD, max_size=14)), COLL)


def _diagnose_all(res: ReadResult) -> None:
    d = diagnose(Evidence(topo=NONE, records=res.records, events=res.events,
                          members=res.members, ranks_seen=res.ranks))
    format_diagnosis(d)
    json.dumps(d.as_dict())


@SETTINGS
@given(st.lists(LINE, max_size=30), st.dictionaries(st.text(max_size=6), st.integers(0, 9),
                                                     max_size=3))
def test_nccl_reader_on_recombined_real_pieces(lines: list[str], rank_map: dict) -> None:
    res = read_nccl_text("\n".join(lines), rank=None, rank_map=rank_map)
    assert res.accounted == res.lines
    _diagnose_all(res)


@SETTINGS
@given(st.text(max_size=2000))
def test_nccl_reader_on_any_text(text: str) -> None:
    res = read_nccl_text(text, rank=1)
    assert res.accounted == res.lines == len(text.splitlines())
    _diagnose_all(res)


JSONISH = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
              st.text(max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=12), inner, max_size=5)),
    max_leaves=30)
ENTRY_KEYS = ["record_id", "pg_id", "process_group", "collective_seq_id", "p2p_seq_id",
              "profiling_name", "time_created_ns", "input_sizes", "input_dtypes", "state",
              "time_discovered_started_ns", "time_discovered_completed_ns", "is_p2p",
              "retired"]


def _real_dump() -> dict:
    with (CORPUS / "fr" / "missing_rank" / "trace_rank_0").open("rb") as fh:
        return pickle.load(fh)


@SETTINGS
@given(st.integers(0, 3), st.sampled_from(ENTRY_KEYS), JSONISH, st.booleans())
def test_flight_recorder_on_mutated_real_dumps(i: int, key: str, value: object,
                                               as_json: bool) -> None:
    d = _real_dump()
    d["entries"][i][key] = value
    d["pg_config"] = {"x": {"ranks": value}} if i == 2 else d["pg_config"]
    _check_dump(d, as_json)


@SETTINGS
@given(JSONISH, st.booleans())
def test_flight_recorder_on_any_structure(data: object, as_json: bool) -> None:
    _check_dump(data, as_json)
    if isinstance(data, list):
        _check_dump({"entries": data, "pg_config": data}, as_json)


@SETTINGS
@given(st.binary(max_size=300))
def test_flight_recorder_on_any_bytes(raw: bytes) -> None:
    _check_file(raw)


def _check_dump(data: object, as_json: bool) -> None:
    if as_json:
        try:
            raw = json.dumps(data).encode()
        except ValueError:
            return
    else:
        buf = io.BytesIO()
        pickle.dump(data, buf)
        raw = buf.getvalue()
    _check_file(raw)


def _check_file(raw: bytes) -> None:
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "trace_rank_1"
        p.write_bytes(raw)
        try:
            res = read_flight_recorder(p)
        except CollogError as e:
            assert str(p) in str(e)
            return
    assert res.accounted == res.lines
    _diagnose_all(res)


@SETTINGS
@given(st.lists(st.text(max_size=20), max_size=3), st.text(max_size=8))
def test_option_parsers(specs: list[str], tz: str) -> None:
    for fn, arg in ((parse_rank_map, specs), (parse_tz, tz)):
        try:
            fn(arg)  # type: ignore[operator]
        except CollogError:
            pass


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(COLL, min_size=1, max_size=12))
def test_plot_after_any_reading(lines: list[str]) -> None:
    import tempfile

    from controller.diagnose.report import plot_diagnosis
    res = read_nccl_text("\n".join(lines))
    ev = Evidence(topo=NONE, records=res.records, events=res.events)
    with tempfile.TemporaryDirectory() as tmp:
        plot_diagnosis(ev, diagnose(ev), Path(tmp) / "d.png")


def _near_valid(changes: list[tuple[str, object]]) -> bytes:
    rec = {"rank": 1, "comm": "c", "op": "allreduce", "seq": 3, "dir": "send", "peer": 2,
           "start": 1767225600.0, "end": 1767225601.0, "bytes": 10}
    lines = [json.dumps(rec)]
    for k, v in changes:
        lines.append(json.dumps({**rec, k: v}))
    return "\n".join(lines).encode()


@SETTINGS
@given(st.one_of(
    st.binary(max_size=400), st.just(b"[" * 100000),
    st.lists(JSONISH, max_size=5).map(lambda xs: "\n".join(json.dumps(x) for x in xs).encode()),
    st.lists(st.tuples(st.sampled_from(["rank", "seq", "start", "end", "dir", "peer", "bytes",
                                        "rate_changes", "comm", "host", "dtype", "v", "x"]),
                       JSONISH), max_size=4).map(_near_valid)))
def test_collective_log_reader_on_anything(raw: bytes) -> None:
    """The test bed's own JSON-lines logs: a bad line is one CollogError naming it."""
    import tempfile

    from traffic.collog import read_log
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "rank0.jsonl"
        p.write_bytes(raw)
        try:
            recs = read_log(p)
        except CollogError as e:
            assert str(p) in str(e)
            return
    _diagnose_all(ReadResult(records=recs))
