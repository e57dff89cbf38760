"""The collector over real UDP sockets on loopback: reports and agent batches."""
from __future__ import annotations

import socket

import numpy as np
import pytest

from controller.int import Collector, CollectorConfig, ConfigError
from controller.int.feed import hop_samples
from controller.int.synth import Hop, build_hpcc_report
from formats.agent_batch import encode_batch, max_records
from formats.int_md import HOST_RECORD_DTYPE, HopRecord, hops_to_array
from tests.helpers.waiting import wait_or_fail


def _host_records(n: int) -> np.ndarray:
    r = np.zeros(n, HOST_RECORD_DTYPE)
    r["src_ip"] = 0x0A000001
    r["dst_ip"] = 0x0A000002
    r["src_port"] = 4000 + np.arange(n) % 3
    r["orig_dport"] = 4791
    r["dest_qp"] = 0x100 + np.arange(n) % 3
    r["psn"] = np.arange(n)
    r["hop_count"] = 2
    r["instruction_bitmap"] = 0x9400
    r["ds_id"] = 0x4850
    r["ds_instruction"] = 0xE000
    hops = hops_to_array([
        HopRecord(node_id=21, egress_ts=2000, tx_bytes=500, queue_bytes=3000, line_rate=10000),
        HopRecord(node_id=20, egress_ts=1000, tx_bytes=400, queue_bytes=1000, line_rate=10000),
    ])
    r["hops"] = hops
    return r


def test_reports_and_agent_batches_over_udp() -> None:
    got = []
    cfg = CollectorConfig(report_port=0, agent_port=0)
    with Collector(cfg, listeners=[lambda b, s: got.append(hop_samples(b, s))]) as c:
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            for i in range(200):
                if i == 50:
                    continue  # one lost report
                hops = [Hop(node_id=k, egress_port=k, egress_ts_us=100 * i + k, tx_bytes=1000 * i,
                            queue_bytes=10 * k, line_rate_mbps=40000) for k in (1, 2, 3)]
                tx.sendto(build_hpcc_report(node_id=7, seq=i, hops=hops, dest_qp=i % 4), c.report_address)
            tx.sendto(b"\x20garbage!!", c.report_address)
            rec = _host_records(max_records(HOST_RECORD_DTYPE.itemsize))
            tx.sendto(encode_batch(rec, agent_id=3, batch_seq=1), c.agent_address)
            tx.sendto(encode_batch(rec[:5], agent_id=3, batch_seq=3), c.agent_address)
        finally:
            tx.close()
        # listeners run after the round's counters and tables: wait for them too
        wait_or_fail(lambda: c.stats().host_records == len(rec) + 5 and c.stats().report_datagrams == 200
                     and sum(len(x) for x in got) == 199 + len(rec) + 5)
        s = c.stats()
    assert s.reports == 199 and s.report_hop_records == 597
    assert s.malformed == {"short": 1}
    assert s.reports_lost == 1 and s.switches[0].node_id == 7
    assert s.agents[0].lost_batches == 1
    assert s.hops == 3 + 2 and s.flows == 4 + 3
    hs = c.hop_snapshot()
    r = dict(zip(zip(hs.node_id.tolist(), hs.egress_port.tolist()), hs.tx_rate_bps.tolist()))
    # the HPCC profile carries no port field: hops are keyed (node, 0)
    assert r[(1, 0)] == pytest.approx(1000 * 8 / 100e-6)  # 1000 B per 100 us
    assert sum(len(x) for x in got) == 199 + len(rec) + 5
    assert all(x.n_hops.max() <= 3 for x in got)
    fs = c.flow_snapshot()
    host_flow = np.flatnonzero(fs.dest_qp == 0x100)[0]
    assert fs.path_node[host_flow, :2].tolist() == [20, 21]  # sender first


def test_port_in_use_is_a_clear_error() -> None:
    blocker = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    blocker.bind(("127.0.0.1", 0))
    try:
        port = blocker.getsockname()[1]
        with pytest.raises(ConfigError, match=f"cannot bind UDP 127.0.0.1:{port}"):
            Collector(CollectorConfig(report_port=port, agent_port=0)).start()
    finally:
        blocker.close()


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="report_port=70000"):
        CollectorConfig(report_port=70000)


def test_agent_shipper_into_collector() -> None:
    """The host agent's own shipper (ebpf.shipper) talking to the collector."""
    shipper_mod = pytest.importorskip("ebpf.shipper")
    with Collector(CollectorConfig(report_port=0, agent_port=0)) as c:
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sh = shipper_mod.BatchShipper(shipper_mod.udp_sender(sock, c.agent_address),
                                          agent_id=0x0A000001,
                                          record_size=HOST_RECORD_DTYPE.itemsize,
                                          batch_records=100)
            rec = _host_records(1000)
            sh.push(rec)
            sh.flush()
            wait_or_fail(lambda: c.stats().host_records == 1000)
        finally:
            sock.close()
        s = c.stats()
    assert s.agents[0].agent_id == 0x0A000001 and s.agents[0].batches == 10
    assert s.agents[0].lost_batches == 0 and s.host_hop_records == 2000
    fs = c.flow_snapshot()
    assert sorted(fs.dest_qp.tolist()) == [0x100, 0x101, 0x102]
    assert sorted(fs.samples.tolist()) == [333, 333, 334]


def test_overload_drops_are_counted() -> None:
    """A collector that falls behind loses datagrams in the kernel, and says how many."""
    import threading

    gate = threading.Event()
    cfg = CollectorConfig(report_port=0, agent_port=0, rcvbuf_bytes=4096)
    report = build_hpcc_report(node_id=1, seq=0, hops=[Hop(node_id=1)])
    with Collector(cfg, listeners=[lambda b, s: gate.wait(10)]) as c:
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            tx.sendto(report, c.report_address)
            wait_or_fail(lambda: c.stats().reports == 1)  # collector thread now stuck in the listener
            for _ in range(300):
                tx.sendto(report, c.report_address)
        finally:
            tx.close()
        drops = c.stats().socket_drops
        gate.set()
        wait_or_fail(lambda: c.stats().report_datagrams + c.stats().socket_drops == 301)
    assert drops > 0


def test_reuse_port_shards_by_sender() -> None:
    """Two collectors on one port: each switch's reports land on one of them, none lost."""
    a = Collector(CollectorConfig(report_port=0, agent_port=None, reuse_port=True)).start()
    try:
        port = a.report_address[1]  # type: ignore[index]
        with Collector(CollectorConfig(report_port=port, agent_port=None, reuse_port=True)) as b:
            senders = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
            try:
                for node, tx in enumerate(senders, start=1):
                    for i in range(20):
                        tx.sendto(build_hpcc_report(node_id=node, seq=i, hops=[Hop(node_id=node)]),
                                  ("127.0.0.1", port))
            finally:
                for tx in senders:
                    tx.close()
            wait_or_fail(lambda: a.stats().reports + b.stats().reports == 160)
            sa, sb = a.stats(), b.stats()
    finally:
        a.stop()
    nodes_a = {s.node_id for s in sa.switches}
    nodes_b = {s.node_id for s in sb.switches}
    assert not nodes_a & nodes_b and nodes_a | nodes_b == set(range(1, 9))
    assert sa.reports_lost == sb.reports_lost == 0


def test_host_record_without_a_sample_keeps_the_flows_path() -> None:
    """The record of a run the agent flushed from an idle flow has no hops: it counts
    for the run's packets, and the flow keeps the path of its last sampled record."""
    rec = _host_records(3)[:1].copy()
    rec["psn_count"], rec["sample_psn"] = 16, 15
    flushed = rec.copy()
    flushed["psn"], flushed["psn_count"], flushed["sample_psn"] = 16, 4, 19
    flushed["hop_count"] = 0
    flushed["hops"] = 0
    with Collector(CollectorConfig(report_port=0, agent_port=0)) as c:
        c.feed_agent_batches([encode_batch(rec, agent_id=3, batch_seq=0)])
        c.feed_agent_batches([encode_batch(flushed, agent_id=3, batch_seq=1)])
        fs = c.flow_snapshot()
    row = np.flatnonzero(fs.dest_qp == 0x100)[0]
    assert fs.path_node[row, :2].tolist() == [20, 21] and fs.hop_count[row] == 2
    assert fs.last_psn[row] == 19
