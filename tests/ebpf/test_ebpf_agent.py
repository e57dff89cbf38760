"""The host agent: batches to a controller socket, feedback relay, CLI and clean detach."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from ebpf.agent import AgentConfig, HostAgent
from ebpf.errors import ConfigError
from ebpf.feedback import FEEDBACK_DTYPE, decode_feedback_datagram, feedback_to_lines
from ebpf.shipper import BatchShipper
from ebpf.sink import SinkConfig
from formats import int_md, roce
from formats.agent_batch import AGENT_BATCH_HEADER_LEN, decode_batch_header
from formats.int_md import HOST_RECORD_DTYPE, HopRecord

ROOT = Path(__file__).resolve().parents[2]


# ---- pure parts ---------------------------------------------------------------------
def test_shipper_bounded_queue_counts_drops_and_never_blocks():
    sent: list[bytes] = []
    blocked = [True]

    def send(data: bytes) -> None:
        if blocked[0]:
            raise BlockingIOError
        sent.append(data)

    sh = BatchShipper(send, agent_id=7, record_size=HOST_RECORD_DTYPE.itemsize,
                      queue_batches=3, batch_records=10)
    recs = np.zeros(45, HOST_RECORD_DTYPE)
    recs["psn"] = np.arange(45)
    sh.push(recs)                     # 5 batches of <= 10: 3 queued, 2 dropped
    sh.flush()                        # socket "full": nothing sent, nothing lost
    assert (sh.stats.queued_batches, sh.stats.batches_dropped, sh.stats.records_dropped) == \
        (3, 2, 15)
    blocked[0] = False
    sh.flush()
    assert sh.stats.batches_sent == 3 and sh.stats.records_sent == 30
    heads = [decode_batch_header(d) for d in sent]
    assert [h.batch_seq for h in heads] == [0, 1, 2] and {h.agent_id for h in heads} == {7}
    got = np.concatenate([np.frombuffer(d[AGENT_BATCH_HEADER_LEN:], HOST_RECORD_DTYPE)
                          for d in sent])
    assert got["psn"].tolist() == list(range(30))
    sh.push(recs[:1])
    sh.flush()
    assert decode_batch_header(sent[-1]).dropped == 15


def test_shipper_counts_unreachable_controller():
    def send(data: bytes) -> None:
        raise ConnectionRefusedError

    sh = BatchShipper(send, agent_id=1, record_size=HOST_RECORD_DTYPE.itemsize)
    sh.push(np.zeros(5, HOST_RECORD_DTYPE))
    sh.flush()
    assert (sh.stats.send_errors, sh.stats.records_dropped, sh.stats.queued_batches) == (1, 5, 0)


def test_feedback_records_to_control_lines():
    rec = np.zeros(4, FEEDBACK_DTYPE)
    rec["flow_id"] = [17, 18, 0, 19]
    rec["rate_bps"] = [25_000_000_000, 0, 1_000_000, 5]
    rec["fec_k"] = [16, 8, 0, 0]
    rec["fec_m"] = [2, 1, 0, 0]
    lines, rejected = feedback_to_lines(decode_feedback_datagram(rec.tobytes()))
    assert lines == ['{"qp":17,"rate_bps":25000000000.0,"fec_k":16,"fec_m":2}',
                     '{"qp":18,"fec_k":8,"fec_m":1}']
    assert rejected == 2                # QP 0; rate 5 bit/s below the endpoint's range
    assert decode_feedback_datagram(b"x" * 33) is None


def test_feedback_dtype_matches_controller():
    cc = pytest.importorskip("controller.cc.feedback")
    assert cc.FEEDBACK_DTYPE == FEEDBACK_DTYPE


def test_config_validated():
    with pytest.raises(ConfigError, match="controller port 0"):
        AgentConfig(iface="x", controller=("127.0.0.1", 0))
    with pytest.raises(ConfigError, match="run_packets 0: expected 1..65535"):
        SinkConfig(run_packets=0)
    with pytest.raises(ConfigError, match="run_ns 0"):
        SinkConfig(run_ns=0)


def test_cli_run_packets_reaches_the_sink_config():
    from ebpf.agent import build_parser
    assert build_parser().parse_args(["--iface", "x"]).run_packets == 16
    assert build_parser().parse_args(["--iface", "x", "--run-packets", "1"]).run_packets == 1
    assert SinkConfig(run_packets=4).defines()["RUN_PACKETS"] == 4


# ---- with the kernel ----------------------------------------------------------------
def _frames(pair, n: int, qp: int = 0x600) -> list[bytes]:
    base = [roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                             dst=pair.h2.ip, sport=47000, opcode=roce.Opcode.WRITE_ONLY,
                             dest_qp=qp, psn=i, payload=b"w" * 32, reth=(0x1000, 5, 32))
            for i in range(n)]
    return [int_md.insert_int(f, [HopRecord(node_id=3, queue_occupancy=i % 100, egress_ts=i,
                                            tx_bytes=i, queue_bytes=1, line_rate=10_000)])
            for i, f in enumerate(base)]


@pytest.mark.root
@pytest.mark.bpf
def test_agent_ships_records_and_relays_feedback(pair, tmp_path):
    from traffic.control import ControlServer

    with pair.h2.enter():
        collector = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        collector.bind(("127.0.0.1", 0))
        fb_tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        fb_port = probe.getsockname()[1]
        probe.close()
    ctl_path = str(tmp_path / "ctl.sock")
    server = ControlServer(ctl_path)
    cfg = AgentConfig(iface=pair.h2.ifname, netns=pair.h2.name,
                      controller=collector.getsockname(), agent_id=0x0A4D0502,
                      feedback_port=fb_port, control_socket=ctl_path, batch_records=50,
                      sink=SinkConfig(run_packets=1))  # a record per packet
    try:
        with HostAgent(cfg) as agent:
            n = 300
            pair.send(_frames(pair, n))
            got = []
            deadline = time.monotonic() + 5
            while sum(len(g) for g in got) < n and time.monotonic() < deadline:
                got.append(agent.read(timeout_s=0.2))
            records = np.concatenate(got)
            assert records["psn"].tolist() == list(range(n))
            assert (records["dest_qp"] == 0x600).all() and (records["opcode"] == 0x0A).all()
            assert records["hops"]["queue_occupancy"][:, 0].tolist() == [i % 100 for i in range(n)]
            # the controller side: 6 datagrams of 50, byte-identical records
            collector.settimeout(2)
            batches = [collector.recv(65535) for _ in range(6)]
            heads = [decode_batch_header(b) for b in batches]
            assert [h.count for h in heads] == [50] * 6
            assert [h.batch_seq for h in heads] == list(range(6))
            assert {h.agent_id for h in heads} == {0x0A4D0502}
            # exact bytes, struct padding included (np.concatenate would not keep padding)
            shipped = b"".join(b[AGENT_BATCH_HEADER_LEN:] for b in batches)
            assert shipped == b"".join(g.tobytes() for g in got)
            assert np.frombuffer(shipped, HOST_RECORD_DTYPE)["psn"].tolist() == list(range(n))
            flows = agent.flows()
            row = flows[flows["key"]["dest_qp"] == 0x600][0]
            assert row["stats"]["packets"] == n and row["stats"]["lost_packets"] == 0
            # feedback: controller records in, endpoint JSON lines out
            fb = np.zeros(2, FEEDBACK_DTYPE)
            fb["flow_id"] = [0x600, 0x601]
            fb["rate_bps"] = [10_000_000_000, 2_000_000_000]
            fb["fec_k"], fb["fec_m"] = [0, 32], [0, 4]
            fb_tx.sendto(fb.tobytes(), ("127.0.0.1", fb_port))
            cmds = []
            deadline = time.monotonic() + 3
            while len(cmds) < 2 and time.monotonic() < deadline:
                agent.read(timeout_s=0.1)
                for c, errs, _ in server.receive():
                    assert errs == []
                    cmds.extend(c)
            assert [(c.qp, c.rate_bps, c.fec_k, c.fec_m) for c in cmds] == [
                (0x600, 1e10, None, None), (0x601, 2e9, 32, 4)]
            st = agent.stats()
            assert st.records == n and st.shipper.records_sent == n
            assert st.feedback_forwarded == 2 and st.shipper.records_dropped == 0
    finally:
        server.close()
        collector.close()
        fb_tx.close()


def _filters(pair) -> str:
    return pair.h2.run(["tc", "filter", "show", "dev", pair.h2.ifname, "ingress"]).stdout


@pytest.mark.root
@pytest.mark.bpf
@pytest.mark.slow
def test_cli_runs_and_detaches_on_exit_and_sigterm(pair):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    argv = [sys.executable, "-m", "ebpf.agent", "--iface", pair.h2.ifname,
            "--controller", "127.0.0.1:39999"]
    res = pair.h2.run([*argv, "0.2", "3"], env=env, cwd=str(ROOT), timeout=60)
    lines = res.stdout.splitlines()
    assert len(lines) == 3 and all("rec" in ln and len(ln) < 80 for ln in lines), res.stdout
    assert _filters(pair).strip() == ""
    proc = pair.h2.popen([*argv, "0.2"], env=env, cwd=str(ROOT), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while "int_sink" not in _filters(pair) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "int_sink" in _filters(pair)
    # `ip netns exec` execs the command, so the PID is the agent itself
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0, proc.stderr.read() if proc.stderr else ""
    assert _filters(pair).strip() == ""


def _count_sinks(pair) -> int:
    return sum("int_sink" in line for line in _filters(pair).splitlines())


@pytest.mark.root
@pytest.mark.bpf
@pytest.mark.slow
def test_filter_left_by_killed_agent_is_replaced(pair):
    from ebpf.sink import IntSink
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = pair.h2.popen([sys.executable, "-m", "ebpf.agent", "--iface", pair.h2.ifname,
                          "0.2"], env=env, cwd=str(ROOT), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while "int_sink" not in _filters(pair) and time.monotonic() < deadline:
        time.sleep(0.2)
    proc.kill()                                   # no chance to clean up
    proc.wait(timeout=10)
    assert _count_sinks(pair) == 1                # the stale filter stays behind ...
    with IntSink(pair.h2.ifname, netns=pair.h2.name):
        assert _count_sinks(pair) == 1            # ... and is replaced, not doubled
    # we shared a clsact we did not create, so our filter went and the qdisc stays
    assert "int_sink" not in _filters(pair)
    pair.h2.run(["tc", "qdisc", "del", "dev", pair.h2.ifname, "clsact"])


def test_format_flows_table():
    from ebpf.records import FLOW_DTYPE, format_flows
    f = np.zeros(2, FLOW_DTYPE)
    f["key"]["src_ip"] = [0x0A000001, 0x0A000003]
    f["key"]["dst_ip"] = 0x0A000002
    f["key"]["src_port"] = [49152, 50000]
    f["key"]["dest_qp"] = [0x11, 0x12]
    f["stats"]["packets"] = [5, 900]
    f["stats"]["lost_packets"] = [0, 7]
    f["stats"]["path_signature"] = 0xDEADBEEF
    lines = format_flows(f)
    assert len(lines) == 3 and all(len(x) < 80 for x in lines)
    assert lines[1].split() == ["10.0.0.3:50000", "10.0.0.2", "12", "900", "7", "0", "0",
                                "deadbeef"]


@pytest.mark.root
@pytest.mark.bpf
def test_controller_collector_decodes_what_the_agent_ships(pair):
    """Across parts: the controller's own collector reads the agent's batches; each
    record covers a run of 16 packets, the agent ships the open run when it stops, and
    the loss map counts every packet once."""
    coll = pytest.importorskip("controller.int.collector")
    from controller.lossmap.listener import FlowLossListener
    from controller.lossmap.stream import FlowLossStream
    n = 403
    hops = [HopRecord(node_id=10 + k, queue_occupancy=k, egress_ts=1000 + k, tx_bytes=500 * k,
                      queue_bytes=100 * k, line_rate=25_000) for k in range(8)]
    frames = [int_md.insert_int(roce.build_frame(
        eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip, dst=pair.h2.ip, sport=48000,
        opcode=roce.Opcode.SEND_ONLY, dest_qp=0x650, psn=i), hops) for i in range(n)]
    lossmap = FlowLossListener(stream=FlowLossStream(n_flows=1024, bin_ns=10**9, n_bins=8))
    with pair.h2.enter():
        collector = coll.Collector(coll.CollectorConfig(report_port=0, agent_port=0),
                                   listeners=[lossmap]).start()
    try:
        cfg = AgentConfig(iface=pair.h2.ifname, netns=pair.h2.name,
                          controller=collector.agent_address, agent_id=5,
                          # only the stop flushes, and runs close on their 16th packet
                          # only (a sender preempted past run_ns would split a run)
                          sink=SinkConfig(flush_idle_ns=10**10, run_ns=10**10))
        with HostAgent(cfg) as agent:
            pair.send(frames)
            deadline = time.monotonic() + 10
            while collector.stats().host_records < n // 16 and time.monotonic() < deadline:
                agent.read(timeout_s=0.1)
            assert collector.stats().host_records == n // 16  # 3 packets still in a run
        # the collector counts a record when decoded and hands it to its listeners just
        # after, on its own thread: wait for the loss map's copy too
        deadline = time.monotonic() + 5
        while ((collector.stats().host_records < n // 16 + 1 or lossmap.records < n // 16 + 1)
               and time.monotonic() < deadline):
            time.sleep(0.05)
        st = collector.stats()
        assert st.host_records == n // 16 + 1
        assert st.host_hop_records == 8 * (n // 16)  # the flushed run has no sample
        assert lossmap.packets == n and lossmap.stream.lost_total.sum() == 0
        assert st.malformed == {} and st.agents[0].agent_id == 5
        assert st.agents[0].lost_batches == 0 and st.agents[0].agent_dropped == 0
    finally:
        collector.stop()
