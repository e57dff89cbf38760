"""`controller run --collectors 2`: two collector processes behind one report port and
one agent port (controller.int.shards), against real P4Runtime servers and real UDP
sockets.  The same telemetry -- Telemetry Reports of 24 flows (one report lost on the
way), host-record batches of 8 flows from 4 agents with PSN gaps -- gives the same
state as one collector: flows, paths, samples, per-flow losses (the loss map), hops,
counters; HPCC runs on the merged flows and sends feedback."""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ctl_app_helpers import SwitchBed

from controller.int.shards import CollectorShards
from controller.int.steer import flow_index
from controller.int.synth import Hop, build_hpcc_report
from controller.runner import Controller, RunConfig, RunError
from formats.agent_batch import encode_batch
from formats.int_md import HOST_RECORD_DTYPE, ROCEV2_UDP_PORT
from tests.helpers.waiting import wait_or_fail

REPORT_FLOWS, PER_FLOW, LOST_REPORT = 24, 6, 37
AGENTS, AGENT_FLOWS, RECORDS = 4, 2, 700


def _reports() -> list[bytes]:
    """Sink s2's reports of flows h1..h4 -> h5: s1's queue stands at 20 kB, both hops
    send 750 B per 100 µs (60 Mbit/s) whichever collector sees which report."""
    out = []
    for k in range(REPORT_FLOWS * PER_FLOW):
        f, i = k % REPORT_FLOWS, k // REPORT_FLOWS
        ts, tx = 1000 + 100 * k, 750 * k
        s1 = Hop(node_id=1, egress_ts_us=ts, tx_bytes=tx, queue_bytes=20_000, queue_pkts=14,
                 line_rate_mbps=100)
        s2 = Hop(node_id=2, egress_port=1, egress_ts_us=ts + 5, tx_bytes=tx, queue_bytes=0,
                 line_rate_mbps=100)
        out.append(build_hpcc_report(node_id=2, seq=k, hops=[s1], sink=s2,
                                     src_ip=f"10.0.1.{f % 4 + 1}", dst_ip="10.0.2.1",
                                     sport=50000 + f, dest_qp=0x100 + f, psn=i))
    del out[LOST_REPORT]
    return out


def _agent_batches(agent: int) -> list[bytes]:
    """Agent ``agent``'s batches: its flows lose every 7th PSN."""
    k = np.arange(RECORDS)
    r = np.zeros(RECORDS, HOST_RECORD_DTYPE)
    f = agent * AGENT_FLOWS + k % AGENT_FLOWS
    r["src_ip"], r["dst_ip"], r["orig_dport"] = 0x0A000101, 0x0A000201, ROCEV2_UDP_PORT
    r["src_port"], r["dest_qp"] = 40000 + f, 0x800 + f
    psn = k // AGENT_FLOWS
    psn = psn + psn // 6
    r["psn"], r["sample_psn"], r["psn_count"] = psn, psn, 1
    t = 1_000_000_000 + 1000 * k
    r["capture_ns"], r["run_first_ns"], r["run_last_ns"] = t, t, t
    return [encode_batch(r[i:i + 50], agent_id=agent + 1, batch_seq=j)
            for j, i in enumerate(range(0, RECORDS, 50))]


def _run(bed: SwitchBed, out: Path, collectors: int,
         cpus: tuple[int, ...] | None = None) -> tuple[dict[str, Any], list[int]]:
    fb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fb.bind(("127.0.0.1", 0))
    agents = {f"h{i}": ("127.0.0.1", fb.getsockname()[1]) for i in range(1, 5)}
    ctl = Controller(cfg=RunConfig(topology=str(bed.topology), out_dir=str(out), report_port=0,
                                   agent_port=0, status_interval_s=60, connect_timeout_s=1.0,
                                   agents=agents, collectors=collectors,
                                   collector_cpus=cpus))
    ctl.start()
    senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(AGENTS + 1)]
    try:
        col = ctl.collector
        assert col is not None and col.report_address and col.agent_address
        assert isinstance(col, CollectorShards) == (collectors > 1)
        if cpus is not None:
            assert isinstance(col, CollectorShards) and col.cpus == list(cpus)
        reports = _reports()
        for d in reports:
            senders[0].sendto(d, col.report_address)
        for a in range(AGENTS):           # one socket (source port) per agent
            for d in _agent_batches(a):
                senders[a + 1].sendto(d, col.agent_address)
        loss = ctl.flow_loss
        assert loss is not None
        # the listeners run after the tables and counters: wait for the loss map itself
        wait_or_fail(lambda: loss.records == AGENTS * RECORDS
                     and int(col.flow_snapshot().samples.sum()) == len(reports) + AGENTS * RECORDS)
        per_process = [s.reports for s in col.shard_stats()] if isinstance(col, CollectorShards) \
            else [col.stats().reports]
        ctl.tick()
        return ctl.snapshot(), per_process
    finally:
        ctl.stop()
        for s in senders:
            s.close()
        fb.close()


def _flows(state: dict[str, Any]) -> dict[tuple, tuple]:
    return {(f["src"], f["dst"], f["sport"], f["qp"]):
            (f["kind"], f["hops"], tuple(f["path"]), f["samples"], f["last_psn"], f["lost"],
             f["rate_bps"] is not None)
            for f in state["flows"]}


def _hops(state: dict[str, Any]) -> dict[tuple, tuple]:
    return {(h["switch"], h["egress_port"]):
            (h["qlen_bytes"], h["line_rate_bps"], h["samples"], round(h["tx_rate_bps"] / 1e3))
            for h in state["hops"]}


def _counters(state: dict[str, Any]) -> dict[str, Any]:
    c = state["collector"]
    return {k: c[k] for k in ("reports", "host_records", "reports_lost", "agent_batches",
                              "agent_lost_batches", "malformed", "listener_errors", "flows")}


def test_two_collector_processes_give_one_collectors_state(testbed: SwitchBed,
                                                           tmp_path: Path) -> None:
    one, per_one = _run(testbed, tmp_path / "one", 1)
    # pinned one process per core (--collector-cpus), as the benchmark scales best
    cores = tuple(sorted(os.sched_getaffinity(0)))[:2]
    two, per_two = _run(testbed, tmp_path / "two", 2, cpus=cores)
    # the kernel steered the reports by flow, as the steering program says
    want = [0, 0]
    for d in _reports():
        want[flow_index(d, 2)] += 1
    assert per_two == want and min(want) > 0
    assert per_one == [len(_reports())]
    f1, f2 = _flows(one), _flows(two)
    assert len(f1) == REPORT_FLOWS + AGENTS * AGENT_FLOWS
    assert f1 == f2
    lost = [v[5] for k, v in f1.items() if k[2] < 50000]   # the agents' flows: PSN gaps
    assert len(lost) == AGENTS * AGENT_FLOWS and all(x > 0 for x in lost)
    assert all(v[6] for k, v in f1.items() if k[2] >= 50000)   # HPCC rates for report flows
    assert _hops(one) == _hops(two)
    assert _hops(two)[("s1", 0)][3] == 60_000       # kbit/s: 750 B per 100 µs
    c1, c2 = _counters(one), _counters(two)
    assert c1 == c2
    assert c1["reports_lost"] == 1 and c1["agent_lost_batches"] == 0
    assert c1["reports"] == len(_reports()) and c1["host_records"] == AGENTS * RECORDS
    assert two["collector"]["feedback_records"] > 0


def test_collectors_out_of_range_is_a_clear_error(testbed: SwitchBed, tmp_path: Path) -> None:
    for n in (0, 65):
        with pytest.raises(RunError, match=f"--collectors {n}: expected 1..64"):
            RunConfig(topology=str(testbed.topology), out_dir=str(tmp_path), collectors=n)


def test_collector_cpus_option_reads_lists_and_ranges_and_names_bad_ones() -> None:
    import argparse

    from controller.cli.run import _cpu_list

    assert _cpu_list("0,1") == (0, 1) and _cpu_list("0-3") == (0, 1, 2, 3)
    assert _cpu_list("0,2-3") == (0, 2, 3)
    for bad in ("", "a", "1-", "-1", "0,,1"):
        with pytest.raises(argparse.ArgumentTypeError, match="expected cores like 0,1 or 0-3"):
            _cpu_list(bad)
    # cores this process may not use: the collector's own error, named
    from controller.int.collector import CollectorConfig
    from controller.int.errors import ConfigError
    from controller.int.shards import CollectorShards
    with pytest.raises(ConfigError, match=r"cpus=\[4096\]: expected cores among"):
        CollectorShards(CollectorConfig(report_port=0, agent_port=0), 2, cpus=[4096])
