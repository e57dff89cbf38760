"""Host records that cover runs of packets: every stripped packet in exactly one record.

Real packets through a veth into the sink (default ``run_packets`` 16); the records'
runs, expanded with ``formats.int_md.psn_runs_to_packets``, must give back every PSN
the source sent, in the order it arrived, whatever the gaps, repeats, reordering,
24-bit wraparound, idle times, flushes and CPUs.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest

from ebpf.records import SinkStat
from ebpf.sink import IntSink, SinkConfig
from formats import int_md, roce
from formats.int_md import HopRecord

pytestmark = [pytest.mark.root, pytest.mark.bpf]

MASK = 0xFFFFFF
HOPS = [HopRecord(node_id=10 + i, queue_occupancy=i, egress_ts=1000 + i, tx_bytes=7 * i,
                  queue_bytes=100 * i, line_rate=100_000) for i in range(3)]


@pytest.fixture(scope="module", params=["tc", "xdp"])
def sink(pair, request) -> Iterator[IntSink]:
    cfg = SinkConfig(hook=request.param, run_ns=2_000_000_000)
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=cfg) as s:
        yield s


@pytest.fixture(autouse=True)
def _clean(pair, sink):
    pair.drain()
    sink.flush_runs(idle_ns=0)
    sink.read()
    yield


def frames(pair, psns: list[int], qp: int, sport: int = 50000) -> list[bytes]:
    return [int_md.insert_int(
        roce.build_frame(eth_src=pair.h1.mac, eth_dst=pair.h2.mac, src=pair.h1.ip,
                         dst=pair.h2.ip, sport=sport, opcode=roce.Opcode.SEND_ONLY,
                         dest_qp=qp, psn=p, payload=bytes(32)), HOPS) for p in psns]


def send(pair, psns: list[int], qp: int) -> None:
    pair.send(frames(pair, psns, qp))
    assert len(pair.recv_udp(len(psns))) == len(psns)


def records_of(sink, qp: int, *, flush: bool = True) -> np.ndarray:
    if flush:
        sink.flush_runs(idle_ns=0)
    r = sink.read(timeout_s=0.2)
    return r[r["dest_qp"] == qp]


def expanded(recs: np.ndarray) -> list[int]:
    _, psn, _ = int_md.psn_runs_to_packets(recs["psn"], recs["psn_count"],
                                           recs["run_first_ns"], recs["run_last_ns"])
    return psn.tolist()


def test_a_train_makes_full_runs_then_the_flush_records_the_rest(pair, sink):
    send(pair, list(range(50)), qp=0x6001)
    before = records_of(sink, 0x6001, flush=False)
    # 3 full runs, each sampled at its last packet with that packet's hops
    assert before["psn"].tolist() == [0, 16, 32]
    assert before["psn_count"].tolist() == [16, 16, 16]
    assert before["sample_psn"].tolist() == [15, 31, 47]
    assert (before["hop_count"] == 3).all() and (before["hops"]["node_id"][:, 0] == 10).all()
    assert (before["run_first_ns"] <= before["run_last_ns"]).all()
    assert (before["capture_ns"] > 0).all()
    rest = records_of(sink, 0x6001)
    assert rest["psn"].tolist() == [48] and rest["psn_count"].tolist() == [2]
    assert rest["hop_count"].tolist() == [0] and rest["sample_psn"].tolist() == [49]
    assert expanded(np.concatenate([before, rest])) == list(range(50))
    assert sink.flush_runs(idle_ns=0) == 0  # nothing left open


def test_gap_across_a_run_boundary(pair, sink):
    psns = list(range(16)) + [18, 19, 20]
    send(pair, psns, qp=0x6002)
    recs = records_of(sink, 0x6002)
    assert [(int(r["psn"]), int(r["psn_count"])) for r in recs] == [(0, 16), (18, 3)]
    assert expanded(recs) == psns


def test_reordered_and_repeated_packets(pair, sink):
    psns = [0, 1, 2, 5, 6, 4, 7, 10, 10, 11, 12]
    send(pair, psns, qp=0x6003)

    def flow() -> np.ndarray:
        return next(r for r in sink.flows() if r["key"]["dest_qp"] == 0x6003)["stats"]

    for closed in (False, True):  # the open run's packets count before it closes too
        st = flow()
        assert st["packets"] == st["int_packets"] == len(psns)
        assert (st["lost_packets"], st["loss_events"], st["out_of_order"]) == (4, 2, 2)
        assert (st["run"] == 0) == closed
        sink.flush_runs(idle_ns=0)
    recs = records_of(sink, 0x6003)
    assert expanded(recs) == psns
    # each packet that did not follow its run closed it, and was that record's sample
    assert recs["sample_psn"].tolist()[:5] == [5, 4, 7, 10, 10]


def test_psn_wraparound_inside_a_run(pair, sink):
    psns = [(MASK - 4 + i) & MASK for i in range(12)]
    send(pair, psns, qp=0x6004)
    recs = records_of(sink, 0x6004)
    assert recs["psn"].tolist() == [MASK - 4] and recs["psn_count"].tolist() == [12]
    assert expanded(recs) == psns


def test_flows_keep_their_own_runs(pair, sink):
    a, b = frames(pair, list(range(20)), qp=0x6005), frames(pair, list(range(20)), qp=0x6006)
    pair.send([f for ab in zip(a, b) for f in ab])
    assert len(pair.recv_udp(40)) == 40
    sink.flush_runs(idle_ns=0)
    r = sink.read(timeout_s=0.2)
    for qp in (0x6005, 0x6006):
        assert expanded(r[r["dest_qp"] == qp]) == list(range(20))


def test_idle_flow_flushed_then_resumed(pair, sink):
    send(pair, list(range(5)), qp=0x6007)
    assert records_of(sink, 0x6007, flush=False).size == 0
    assert sink.flush_runs(idle_ns=10**9) == 0  # not idle that long
    time.sleep(0.03)  # several kernel ticks
    assert sink.flush_runs(idle_ns=10_000_000) >= 1
    first = records_of(sink, 0x6007, flush=False)
    assert expanded(first) == list(range(5)) and first["hop_count"].tolist() == [0]
    send(pair, list(range(5, 12)), qp=0x6007)  # resumes: a new run from 5
    rest = records_of(sink, 0x6007)
    assert rest["psn"].tolist() == [5] and expanded(rest) == list(range(5, 12))


def test_a_run_older_than_run_ns_closes_at_its_next_packet(pair, sink):
    if sink.config.hook != "tc":
        pytest.skip("the module's XDP sink would strip the INT first")
    # run_ns well above the time four back-to-back sends take on a loaded host (a 1 ms
    # run closed inside the first four when the sender was preempted), the pause well
    # above run_ns
    cfg = SinkConfig(run_ns=50_000_000, prio=17)
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=cfg) as s:
        pair.drain()
        send(pair, list(range(4)), qp=0x6008)
        time.sleep(0.3)
        send(pair, list(range(4, 8)), qp=0x6008)
        recs = records_of(s, 0x6008)
        assert [(int(r["psn"]), int(r["psn_count"])) for r in recs] == [(0, 4), (4, 4)]
        assert recs["sample_psn"].tolist()[0] == 4  # the packet that found it too old
        assert recs["run_last_ns"][0] < recs["run_first_ns"][1]


def test_stop_flushes_open_runs(pair, sink):
    if sink.config.hook != "tc":
        pytest.skip("the module's XDP sink would strip the INT first")
    with IntSink(pair.h2.ifname, netns=pair.h2.name, config=SinkConfig(prio=17)) as s:
        pair.drain()
        send(pair, list(range(21)), qp=0x6009)
        got = s.stop()  # detached: later packets are not seen, open runs are recorded
        assert expanded(got[got["dest_qp"] == 0x6009]) == list(range(21))
        assert s.flush_runs(idle_ns=0) == 0


def test_packets_of_one_flow_from_two_cpus_each_recorded_once(pair, sink):
    """Two senders pinned to different CPUs (the veth runs the sink on the sender's
    CPU) race on one flow's run: the atomic swaps must still record every packet once."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    cpus = sorted(os.sched_getaffinity(0))[:2]
    n = 3000
    all_frames = frames(pair, list(range(2 * n)), qp=0x600A)
    # chunks of 4 consecutive PSNs, alternating between the senders: runs form and break
    chunks = [all_frames[i:i + 4] for i in range(0, 2 * n, 4)]
    halves = [[f for c in chunks[0::2] for f in c], [f for c in chunks[1::2] for f in c]]
    before = sink.stats()

    def blast(cpu: int, part: list[bytes]) -> None:
        os.sched_setaffinity(0, {cpu})
        pair.send(part)

    threads = [threading.Thread(target=blast, args=(c, h)) for c, h in zip(cpus, halves)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    time.sleep(0.2)
    recs = records_of(sink, 0x600A)
    after = sink.stats()
    stripped = after[SinkStat.INT_STRIPPED] - before[SinkStat.INT_STRIPPED]
    if sink.config.hook == "tc":
        assert stripped == 2 * n
    # (veth's XDP ring may overflow under two senders: those never reach the sink)
    assert after[SinkStat.RINGBUF_FULL] == before[SinkStat.RINGBUF_FULL]
    got = expanded(recs)
    assert len(got) == stripped and len(set(got)) == stripped
    assert set(got) <= set(range(2 * n))
