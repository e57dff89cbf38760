"""Collectors behind one port: the kernel steers reports by inner flow (the classic BPF
program), N processes keep disjoint flows, and their merged tables equal one
collector's fed the same telemetry."""
from __future__ import annotations

import os
import socket

import numpy as np
import pytest

from controller.int.collector import Collector, CollectorConfig
from controller.int.errors import ConfigError
from controller.int.shards import CollectorShards
from controller.int.steer import attach_flow_steering, flow_index
from controller.int.synth import Hop, build_hpcc_report
from tests.helpers.waiting import wait_or_fail


def _reports(flows: int, per_flow: int) -> list[bytes]:
    out = []
    for i in range(per_flow):
        for f in range(flows):
            hops = [Hop(node_id=n, egress_port=f % 3, egress_ts_us=1000 * i + n,
                        tx_bytes=1500 * i, queue_bytes=100 * f, line_rate_mbps=1000)
                    for n in (1, 2)]
            out.append(build_hpcc_report(node_id=9, seq=i * flows + f, hops=hops,
                                         src_ip=f"10.0.{f // 200}.{f % 200 + 1}",
                                         sport=49152 + f, dest_qp=f, psn=i))
    return out


def test_kernel_steers_each_flow_where_the_program_says() -> None:
    socks = []
    try:
        for _ in range(3):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            s.bind(("127.0.0.1", socks[0].getsockname()[1] if socks else 0))
            s.setblocking(False)
            socks.append(s)
        attach_flow_steering(socks[0], 3)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:   # one source
            for r in _reports(60, 2):
                tx.sendto(r, socks[0].getsockname())
            tx.sendto(b"\x20" * 12, socks[0].getsockname())   # too short for the loads
        junk: list[bytes] = []
        got = []
        for i, s in enumerate(socks):
            try:
                while True:
                    d = s.recv(9000)
                    if len(d) == 12:
                        junk.append(d)
                        assert i == 0, "a datagram the program cannot read goes to socket 0"
                        continue
                    got.append((flow_index(d, 3), i))
            except BlockingIOError:
                pass
    finally:
        for s in socks:
            s.close()
    assert len(got) == 120 and len(junk) == 1
    assert all(want == where for want, where in got)
    assert {where for _, where in got} == {0, 1, 2}


def _flow_rows(f) -> list[tuple[int, ...]]:  # type: ignore[no-untyped-def]
    return sorted(zip(f.src_ip.tolist(), f.sport.tolist(), f.dest_qp.tolist(),
                      f.samples.tolist(), f.hop_count.tolist()))


def test_two_processes_merge_to_one_collectors_view() -> None:
    reports = _reports(40, 5)
    del reports[57]   # one report lost on the way: counted once, not per process
    cfg = CollectorConfig(report_port=0, agent_port=0)
    with Collector(cfg) as one, CollectorShards(cfg, 2) as many, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as tx:
        for r in reports:
            tx.sendto(r, one.report_address)
            tx.sendto(r, many.report_address)
        # the tables are updated after the counters: wait for the flows themselves
        wait_or_fail(lambda: int(one.flow_snapshot().samples.sum()) == len(reports)
                     and int(many.flow_snapshot().samples.sum()) == len(reports))
        parts = [p.reports for p in many.shard_stats()]
        f1, fm = one.flow_snapshot(), many.flow_snapshot()
        h1, hm = one.hop_snapshot(), many.hop_snapshot()
        st, st1 = many.stats(), one.stats()
    assert all(p > 0 for p in parts)            # both processes took flows
    assert _flow_rows(f1) == _flow_rows(fm)     # each flow whole, in one process
    assert len(set(zip(fm.src_ip.tolist(), fm.sport.tolist()))) == 40
    k1 = sorted(zip(h1.node_id.tolist(), h1.egress_port.tolist(), h1.samples.tolist()))
    km = sorted(zip(hm.node_id.tolist(), hm.egress_port.tolist(), hm.samples.tolist()))
    assert k1 == km
    # a merged flow's path points at the merged hop rows of its (switch, port)
    ok = fm.path_slot[:, :2] >= 0
    assert ok.all()
    assert (hm.node_id[fm.path_slot[:, :2]] == fm.path_node[:, :2]).all()
    assert st.reports == len(reports) and st.reports_lost == st1.reports_lost == 1
    assert np.array_equal(np.sort(fm.samples), np.sort(f1.samples))


@pytest.mark.parametrize("pinned", [False, True], ids=["scheduled", "pinned"])
def test_a_held_backlog_is_steered_by_flow_and_counted_once(pinned: bool) -> None:
    """The benchmark's pre-fill (``bench_collector --shards``): reports sent into held
    processes wait in the socket the steering program picks, and once released every
    report is taken exactly once, each flow whole in its process, the drain timed by
    the processes' own stamps after the release.  Pinned: every thread of worker i
    runs on core i only (each process's share is then sent from its core)."""
    from bench.bench_collector import prefill_drain

    flows, per_flow = 60, 20
    reports = _reports(flows, per_flow)
    cfg = CollectorConfig(report_port=0, agent_port=None, rcvbuf_bytes=16 << 20)
    cpus = sorted(os.sched_getaffinity(0))[:2] if pinned else None
    with CollectorShards(cfg, 2, cpus=cpus) as many:
        if cpus is not None:
            for i, pid in enumerate(many.pids):
                for tid in os.listdir(f"/proc/{pid}/task"):
                    assert os.sched_getaffinity(int(tid)) == {cpus[i % len(cpus)]}
        d = prefill_drain(many, reports, poll_s=0.02)
        st = many.stats()
        wait_or_fail(lambda: int(many.flow_snapshot().samples.sum()) == len(reports))
        fm = many.flow_snapshot()
        d2 = prefill_drain(many, reports[: 5 * flows], poll_s=0.02)   # a second backlog
    assert d.drops == 0 and d.sent == len(reports)
    assert sum(d.split) == st.reports == len(reports)          # once each, no more
    want = [0, 0]
    for r in reports[:flows]:
        want[flow_index(r, 2)] += per_flow
    assert d.split == want and all(want)                       # where the program says
    assert d.wall_s > 0 and st.last_round_ns > 0
    # one row per flow, all its samples, in the process its reports were steered to
    assert len(fm.slot) == flows and (fm.samples == per_flow).all()
    where = {(int(ip), int(sp)): int(slot) // cfg.flow_capacity
             for ip, sp, slot in zip(fm.src_ip, fm.sport, fm.slot)}
    for f, r in enumerate(reports[:flows]):   # _reports: flow f's source and port
        key = (0x0A000000 + ((f // 200) << 8) + f % 200 + 1, 49152 + f)
        assert where[key] == flow_index(r, 2)
    # counted per backlog: the second one's split is its own reports only
    assert sum(d2.split) == 5 * flows and d2.drops == 0


def test_cpus_outside_the_allowed_set_are_refused() -> None:
    with pytest.raises(ConfigError, match="cpus="):
        CollectorShards(CollectorConfig(report_port=0, agent_port=None), 2, cpus=[4096])
