"""Control protocol parsing, workload plans, size distributions, CLI validation."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.traffic.netns_util import ROOT
from traffic.control import ControlCommand, parse_control
from traffic.errors import ConfigError
from traffic.workloads import (
    Pattern,
    connection_qpn,
    make_plan,
    parse_size,
    parse_size_dist,
)


def test_control_lines_parse() -> None:
    cmds, errs = parse_control(b'{"qp": 17, "rate_bps": 2.5e10}\n'
                               b'{"qp": "*", "fec_k": 16, "fec_m": 2}\n{"cmd": "stats"}')
    assert errs == []
    assert cmds == [ControlCommand(qp=17, rate_bps=2.5e10),
                    ControlCommand(qp=None, fec_k=16, fec_m=2),
                    ControlCommand(stats=True)]


@pytest.mark.parametrize("line,msg", [
    (b'{"qp": 0, "rate_bps": 1e6}', "qp=0 is not a QP number"),
    (b'{"qp": 1, "rate_bps": 5}', "rate_bps=5 outside"),
    (b'{"qp": 1, "fec_k": 8}', "fec_k and fec_m must be given together"),
    (b'{"qp": 1, "fec_k": 0, "fec_m": 1}', "fec_k=0 outside 1..128"),
    (b'{"qp": 1, "rate": 1e6}', "unknown key(s) ['rate']"),
    (b'{"qp": 1}', "nothing to set"),
    (b"not json", "control line 2: invalid JSON"),
    (b'[1]', "expected a JSON object, got list"),
])
def test_control_errors_name_line_and_value(line: bytes, msg: str) -> None:
    cmds, errs = parse_control(b'{"qp": 2, "rate_bps": 1e6}\n' + line)
    assert cmds == [ControlCommand(qp=2, rate_bps=1e6)]  # good lines are kept
    assert len(errs) == 1 and msg in errs[0]


def test_sizes_and_distributions(tmp_path) -> None:
    assert parse_size("64K") == 65536 and parse_size("1.5M") == 1572864
    with pytest.raises(ConfigError, match="size '12Q'"):
        parse_size("12Q")
    u = parse_size_dist("uniform:1K:2K")
    s = u.sample(100, seed=1)
    assert min(s) >= 1024 and max(s) <= 2048
    cdf = tmp_path / "ws.txt"
    cdf.write_text("# size cdf\n100 0\n1000 50\n10000 100\n")
    d = parse_size_dist(f"cdf:{cdf}")
    s = d.sample(2000, seed=1)
    assert 100 <= min(s) and max(s) <= 10000
    assert sum(1 for x in s if x <= 1000) == pytest.approx(1000, rel=0.1)
    cdf.write_text("100 0\n50 1\n")
    with pytest.raises(ConfigError, match="must not decrease"):
        parse_size_dist(f"cdf:{cdf}")
    with pytest.raises(ConfigError, match="kind 'zipf' unknown"):
        parse_size_dist("zipf:3")


def test_plans_agree_on_qp_numbers() -> None:
    sizes = parse_size_dist("4K")
    plans = [make_plan(Pattern.ALLTOALL, rank=r, nranks=4, qps=2, count=3, sizes=sizes)
             for r in range(4)]
    sends = {(p.rank, f.peer, f.chan): f for p in plans for f in p.send}
    recvs = {(f.peer, p.rank, f.chan): f for p in plans for f in p.recv}
    assert sends.keys() == recvs.keys() and len(sends) == 4 * 3 * 2
    for key, f in sends.items():
        assert recvs[key].qpn == f.peer_qpn and recvs[key].peer_qpn == f.qpn
        assert recvs[key].expect == len(f.sizes) == 3
    assert connection_qpn(1, 3, 2) == 0x010302
    for p in plans:  # unique on every host
        qpns = [f.qpn for f in p.send + p.recv]
        assert len(set(qpns)) == len(qpns)
    with pytest.raises(ConfigError, match="cannot be its own peer"):
        connection_qpn(2, 2, 0)


def test_allreduce_plan_is_a_ring_with_2n_minus_2_steps() -> None:
    n = 5
    for r in range(n):
        p = make_plan(Pattern.ALLREDUCE, rank=r, nranks=n, qps=4, count=2,
                      sizes=parse_size_dist("1M"))
        assert [f.peer for f in p.send] == [(r + 1) % n] * 4  # one QP per channel
        assert [f.peer for f in p.recv] == [(r - 1) % n] * 4
        assert all(f.expect == 2 * (n - 1) * 2 for f in p.recv)


def test_incast_and_kvcache_plans() -> None:
    sizes = parse_size_dist("1M")
    p0 = make_plan(Pattern.INCAST, rank=0, nranks=5, qps=1, count=2, sizes=sizes)
    assert sorted(f.peer for f in p0.recv) == [1, 2, 3, 4] and p0.send == []
    kv = [make_plan(Pattern.KVCACHE, rank=r, nranks=5, qps=2, count=2, sizes=sizes,
                    prefill=3) for r in range(5)]
    assert [sorted({f.peer for f in p.send}) for p in kv[:3]] == [[3, 4]] * 3
    assert sorted(f.peer for f in kv[3].recv) == [0, 0, 1, 1, 2, 2]
    half = make_plan(Pattern.KVCACHE, rank=0, nranks=4, qps=1, count=1, sizes=sizes)
    assert sorted(f.peer for f in half.send) == [2, 3]  # default: half the ranks prefill


def test_cli_rejects_bad_arguments_with_clear_messages() -> None:
    res = subprocess.run([sys.executable, "-m", "traffic", "p2p", "--hosts", "10.0.0.1,bad",
                          "--rank", "0"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 2 and "'bad' is not an IPv4 address" in res.stderr
    res = subprocess.run([sys.executable, "-m", "traffic", "p2p", "--hosts",
                          "10.0.0.1,10.0.0.2", "--rank", "0", "--fec", "8"],
                         cwd=ROOT, capture_output=True, text=True, timeout=30, check=False)
    assert res.returncode == 2 and "expected K,M" in res.stderr
    res = subprocess.run([sys.executable, "-m", "traffic", "--help"], cwd=ROOT, capture_output=True,
                         text=True, timeout=30, check=False)
    assert "examples:" in res.stdout and "allreduce" in res.stdout


def test_local_launcher_runs_every_rank_and_aggregates(tmp_path) -> None:
    res = subprocess.run([sys.executable, "-m", "traffic", "local", "alltoall", "-n", "3",
                          "-s", "4K", "-c", "4", "--rate", "50M", "-O", str(tmp_path),
                          "--timeout", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=90, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    lines = [json.loads(x) for x in res.stdout.strip().splitlines()]
    assert [x["rank"] for x in lines[:3]] == [0, 1, 2]
    agg = lines[3]
    assert agg["collective"] == "alltoall" and agg["finished"]
    assert agg["bytes"] == 3 * 2 * 4 * 4096
    for r in range(3):
        s = json.loads((tmp_path / f"rank{r}.json").read_text())
        assert len([m for m in s["messages"] if m["dir"] == "rx"]) == 8
        assert s["endpoint"]["series"]  # per-QP time series are written


def test_sigterm_writes_a_summary_and_removes_the_control_socket(tmp_path) -> None:
    import signal

    ctl, out = tmp_path / "ctl.sock", tmp_path / "r1.json"
    p = subprocess.Popen([sys.executable, "-m", "traffic", "p2p", "--hosts",
                          "127.0.77.1,127.0.77.2", "--rank", "1", "-c", "5", "--control",
                          str(ctl), "-o", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith("ready rank 1")
        assert ctl.exists()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)  # a bound, not a speed check: loaded CI took > 20 s
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and "interrupted" in err
    summary = json.loads(out.read_text())
    assert summary["interrupted"] and not summary["finished"]
    assert not ctl.exists()


def test_local_kvcache_bursts_reach_the_decode_rank(tmp_path) -> None:
    res = subprocess.run([sys.executable, "-m", "traffic", "local", "kvcache", "-n", "3",
                          "--prefill", "2", "-s", "64K", "-c", "3", "-q", "2",
                          "--rate", "100M", "-O", str(tmp_path), "--timeout", "20"],
                         cwd=ROOT, capture_output=True, text=True, timeout=90, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    agg = json.loads(res.stdout.strip().splitlines()[-1])
    assert agg["collective"] == "kvcache" and agg["finished"]
    assert agg["bytes"] == 2 * 2 * 3 * 65536 and agg["algbw_bps"] > 0
    decode = json.loads((tmp_path / "rank2.json").read_text())
    assert len([m for m in decode["messages"] if m["dir"] == "rx"]) == 12


def test_loss_on_every_packet_kind_still_delivers(tmp_path) -> None:
    """Loss scope 'all' also drops ACKs: cumulative ACKs and the timer recover."""
    import os
    import zlib

    from common.loss import LossModel, LossProcess
    from traffic.endpoint import Endpoint, EndpointConfig
    from traffic.qp_types import QpConfig

    a = Endpoint(EndpointConfig(ip="127.0.78.1", loss=LossProcess(LossModel.bernoulli(0.5), seed=2),
                                loss_scope="all"))
    b = Endpoint(EndpointConfig(ip="127.0.78.2", loss=LossProcess(LossModel.bernoulli(0.05), seed=3),
                                loss_scope="all"))
    try:
        req = a.add_requester(QpConfig(qpn=3, peer_qpn=3, peer_ip="127.0.78.2", mode="sr",
                                       rate_bps=200e6, rto_min_s=0.01))
        resp = b.add_responder(QpConfig(qpn=3, peer_qpn=3, peer_ip="127.0.78.1", mode="sr"))
        msgs = [os.urandom(20_000) for _ in range(20)]
        for m in msgs:
            req.post_write(m, now=a.now())
        for _ in range(200_000):
            if req.idle:
                break
            a.step(0.0005)
            b.step(0.0005)
        assert req.idle
        assert [m.crc32 for m in resp.messages] == [zlib.crc32(m) for m in msgs]
        assert a.counters.injected_drops > 0 and b.counters.injected_drops > 0
    finally:
        a.close()
        b.close()


def test_many_qps_in_one_process() -> None:
    import os
    import zlib

    from traffic.endpoint import Endpoint, EndpointConfig
    from traffic.qp_types import QpConfig

    a = Endpoint(EndpointConfig(ip="127.0.79.1"))
    b = Endpoint(EndpointConfig(ip="127.0.79.2"))
    try:
        pairs = []
        for q in range(1, 65):
            mode = ("gbn", "sr", "fec")[q % 3]
            req = a.add_requester(QpConfig(qpn=q, peer_qpn=q, peer_ip="127.0.79.2", mode=mode,
                                           rate_bps=20e6))
            resp = b.add_responder(QpConfig(qpn=q, peer_qpn=q, peer_ip="127.0.79.1",
                                            mode=mode))
            data = os.urandom(3000 + q)
            req.post_write(data, now=a.now())
            pairs.append((req, resp, data))
        for _ in range(100_000):
            if all(r.idle for r, _, _ in pairs):
                break
            a.step(0.0005)
            b.step(0.0005)
        for req, resp, data in pairs:
            assert req.idle and [m.crc32 for m in resp.messages] == [zlib.crc32(data)]
        assert len({r.sport for r, _, _ in pairs}) == 64  # per-QP UDP entropy
        stats = a.stats(compact=True)
        assert len(stats["requesters"]) == 64
    finally:
        a.close()
        b.close()
