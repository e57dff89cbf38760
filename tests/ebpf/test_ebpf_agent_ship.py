"""When the host agent ships its records (``ebpf.shipper.ShipPolicy``), and the HPCC loop
it feeds, measured end to end.

Pure parts on a fake clock: held records leave once N are waiting, when the oldest has
waited the interval, or at once (or after the shorter queued interval) when one saw a
queue.  With the kernel: a real agent (its sink on a veth, keyed) holds telemetry of
empty queues, ships a record that saw a queue without waiting for the timer (counted),
and the controller's collector and HPCC loop answer it; the feedback goes through the
agent to a sender's control socket, is confirmed, and the loop's end-to-end latency
(host capture -> rate applied) gets its sample."""
from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from common.auth import KeyFile, KeyRing
from ebpf.agent import AgentConfig, HostAgent
from ebpf.errors import ConfigError
from ebpf.shipper import IMMEDIATE, BatchShipper, ShipPolicy, queued_mask
from ebpf.sink import SinkConfig
from formats import int_md, roce
from formats.agent_batch import AGENT_BATCH_HEADER_LEN, decode_batch_header
from formats.auth import CONTROLLER_SENDER_ID
from formats.int_md import HOST_RECORD_DTYPE, HopRecord

AGENT = 0x0A4D0502
KEYS = KeyFile.from_ring(KeyRing(keys={4: b"q" * 32}, sign_key_id=4,
                                 senders=frozenset({CONTROLLER_SENDER_ID, AGENT})))


# ---- pure parts ---------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.ns = 1_000_000_000

    def __call__(self) -> int:
        return self.ns

    def advance(self, s: float) -> None:
        self.ns += int(s * 1e9)


def _records(n: int, queue: int = 0, first: int = 0) -> np.ndarray:
    r = np.zeros(n, HOST_RECORD_DTYPE)
    r["psn"] = np.arange(first, first + n)
    r["hop_count"] = 2
    r["hops"]["queue_bytes"][:, 1] = queue      # the second hop of the stack
    return r


def _shipper(policy: ShipPolicy, clock: Clock) -> tuple[BatchShipper, list[bytes]]:
    sent: list[bytes] = []
    return BatchShipper(sent.append, agent_id=1, record_size=HOST_RECORD_DTYPE.itemsize,
                        policy=policy, clock_ns=clock), sent


def _psns(datagram: bytes) -> list[int]:
    return np.frombuffer(datagram[AGENT_BATCH_HEADER_LEN:], HOST_RECORD_DTYPE)["psn"].tolist()


def test_queued_mask_looks_only_at_the_hops_of_the_stack():
    r = _records(3)
    r["hops"]["queue_occupancy"][1, 0] = 2          # packets queued at hop 0 of record 1
    r["hops"]["queue_bytes"][2, 5] = 9_000          # beyond record 2's two hops: not a hop
    assert queued_mask(r).tolist() == [False, True, False]


def test_quiet_records_wait_for_n_or_the_timer_and_a_queue_ships_at_once():
    clock = Clock()
    sh, sent = _shipper(ShipPolicy(records=8, interval_s=0.005), clock)
    sh.offer(_records(3))
    sh.flush()
    assert sent == [] and sh.stats.held_records == 3
    assert sh.due() == pytest.approx(0.005)           # the wait left for the caller
    sh.offer(_records(5, first=3))                    # 8 held: one datagram
    sh.flush()
    assert [_psns(d) for d in sent] == [list(range(8))] and sh.stats.full_ships == 1
    sh.offer(_records(2, first=8))
    clock.advance(0.004)
    assert sh.due() == pytest.approx(0.001)
    clock.advance(0.001)
    assert sh.due() is None                           # the timer: shipped
    sh.flush()
    assert _psns(sent[-1]) == [8, 9] and sh.stats.timer_ships == 1
    sh.offer(_records(2, first=10))
    sh.offer(_records(1, queue=3_000, first=12))      # a queue: everything held, at once
    sh.flush()
    assert _psns(sent[-1]) == [10, 11, 12] and sh.stats.urgent_ships == 1
    assert sh.stats.held_records == 0 and sh.stats.records_sent == 13
    assert [decode_batch_header(d).batch_seq for d in sent] == [0, 1, 2]


def test_a_queued_interval_bounds_the_hold_of_a_record_that_saw_a_queue():
    clock = Clock()
    sh, sent = _shipper(ShipPolicy(records=64, interval_s=0.010, queued_interval_s=0.001),
                        clock)
    sh.offer(_records(1))
    clock.advance(0.002)
    sh.offer(_records(1, queue=1, first=1))
    assert sh.due() == pytest.approx(0.001)           # the queued record's deadline
    clock.advance(0.001)
    assert sh.due() is None
    sh.flush()
    assert [_psns(d) for d in sent] == [[0, 1]] and sh.stats.urgent_ships == 1


def test_immediate_policy_ships_every_offer_and_release_empties_the_hold():
    clock = Clock()
    sh, sent = _shipper(IMMEDIATE, clock)
    sh.offer(_records(2))
    sh.offer(_records(1, first=2))
    sh.flush()
    assert [_psns(d) for d in sent] == [[0, 1], [2]]
    sh2, sent2 = _shipper(ShipPolicy(records=100, interval_s=5.0), clock)
    sh2.offer(_records(4))
    sh2.release()
    sh2.flush()
    assert [_psns(d) for d in sent2] == [[0, 1, 2, 3]]


def test_ship_policy_validated():
    with pytest.raises(ConfigError, match="records 0"):
        ShipPolicy(records=0)
    with pytest.raises(ConfigError, match="queued_interval_s -1"):
        ShipPolicy(queued_interval_s=-1)


# ---- with the kernel ----------------------------------------------------------------
def _frames(pair, psns: range, queue_bytes: int) -> list[bytes]:
    return [int_md.insert_int(roce.build_frame(
        eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip, dst=pair.h2.ip, sport=48100,
        opcode=roce.Opcode.WRITE_ONLY, dest_qp=0x670, psn=i, payload=b"w" * 32,
        reth=(0x1000, 5, 32)),
        [HopRecord(node_id=2, egress_ts=1000 + 100 * i, tx_bytes=1100 * i, queue_bytes=0,
                   line_rate=100),
         HopRecord(node_id=1, egress_ts=990 + 100 * i, tx_bytes=1100 * i,
                   queue_bytes=queue_bytes, queue_occupancy=queue_bytes // 1000,
                   line_rate=100)])
        for i in psns]


def _read_until(agent: HostAgent, cond, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        agent.read(timeout_s=0.05)
    return True


@pytest.mark.root
@pytest.mark.bpf
def test_agent_holds_quiet_telemetry_and_ships_a_queue_at_once_to_the_hpcc_loop(pair,
                                                                                 tmp_path):
    from common.auth import Signer, Verifier
    from controller.cc import FeedbackSender, HpccEngine, HpccParams
    from controller.cc.loop import FeedbackTarget, HpccLoop
    from controller.int.collector import Collector, CollectorConfig
    from formats.auth import FrameKind
    from traffic.control import ControlServer

    pair.drain()
    eng = HpccEngine(n_flows=16, params=HpccParams(base_rtt_s=1e-3))
    fb = FeedbackSender(n_flows=16, min_change_fraction=0.0,
                        signer=Signer(KEYS, sender_id=CONTROLLER_SENDER_ID,
                                      kind=FrameKind.FEEDBACK),
                        verifier=Verifier(KEYS, kinds=(FrameKind.CONFIRM,)))
    with pair.h2.enter():
        fb.sock.bind(("127.0.0.1", 0))
        probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        probe.bind(("127.0.0.1", 0))
        fb_port = probe.getsockname()[1]
        probe.close()
        # the agent answers from an abstract address: the endpoint lives in its namespace
        endpoint = ControlServer(str(tmp_path / "sender.sock"))
    loop = HpccLoop(engine=eng, sender=fb, resolve=lambda s: FeedbackTarget(
        agent=("127.0.0.1", fb_port), flow_id=int(s["dest_qp"]), max_rate_bps=100e6))
    col = Collector(CollectorConfig(report_port=0, agent_port=0, flow_capacity=16, keys=KEYS),
                    listeners=[loop])
    with pair.h2.enter():
        col.start()
    col.add_reader(fb.sock, loop.poll_confirmations)
    # quiet telemetry may wait (here: far longer than the test), a queue may not; one
    # host record per packet (runs of PSNs are tested in test_ebpf_sink_runs.py)
    cfg = AgentConfig(sink=SinkConfig(run_packets=1), iface=pair.h2.ifname, netns=pair.h2.name, keys=KEYS, agent_id=AGENT,
                      controller=col.agent_address, feedback_port=fb_port,
                      feedback_bind="127.0.0.1", control_socket=endpoint.path,
                      ship=ShipPolicy(records=1000, interval_s=10.0))
    confirmed = []

    def serve_endpoint() -> None:
        for cmds, _errs, addr in endpoint.receive():
            entries = [{"seq": c.seq, "qp": c.qp, "status": "applied", "psn": 7}
                       for c in cmds if c.seq is not None]
            confirmed.extend(entries)
            if entries:
                endpoint.reply(addr, {"confirm": entries})

    try:
        with HostAgent(cfg) as agent:
            pair.send(_frames(pair, range(6), 0))
            assert _read_until(agent, lambda: agent.stats().records == 6)
            agent.read(timeout_s=0.2)
            st = agent.stats().shipper
            assert st.held_records == 6 and st.records_sent == 0
            assert col.stats().host_records == 0      # nothing reached the controller
            pair.send(_frames(pair, range(6, 7), 30_000))
            # the queued record leaves at once with the six held ones, in one datagram
            assert _read_until(agent, lambda: col.stats().host_records == 7)
            st = agent.stats().shipper
            assert (st.urgent_ships, st.timer_ships, st.full_ships) == (1, 0, 0)
            assert st.batches_sent == 1 and st.records_sent == 7 and st.held_records == 0
            assert col.stats().agent_datagrams == 1 and col.stats().rejected == {}
            # the loop answered: feedback relayed to the sender, applied, confirmed
            assert _read_until(agent, lambda: (serve_endpoint(), confirmed)[1] != [])

            def host_sample() -> bool:   # the confirmation: read on the collector thread
                serve_endpoint()
                return eng.latency.summary()["host_to_applied"].count >= 1

            assert _read_until(agent, host_sample)
            lat = eng.latency.summary()
            assert lat["host_to_applied"].max_s >= lat["decision_to_applied"].p50_s > 0
            assert eng.latency.clock_mismatch == 0
            assert {c["qp"] for c in confirmed} == {0x670}
            # more quiet telemetry is held again; closing the agent ships it
            pair.send(_frames(pair, range(7, 10), 0))
            assert _read_until(agent, lambda: agent.stats().shipper.held_records == 3)
        assert _wait(lambda: col.stats().host_records == 10)
    finally:
        col.stop()
        fb.close()
        endpoint.close()


def _wait(cond, timeout_s: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
