"""A standby controller keeps a warm view: an agent's shipper gives every batch to the
primary and a copy to the standby (``ebpf.shipper.UdpFanout``), sealed once; when the
primary goes away the standby's loss map has no gap: it equals the primary's up to
the failover and a never-failing collector's after it."""
from __future__ import annotations

import socket

import numpy as np

from common.auth import KeyFile, Signer
from common.auth.keys import generate_key_file
from controller.int.collector import Collector, CollectorConfig
from controller.lossmap.listener import FlowLossListener
from controller.lossmap.stream import FlowLossStream
from ebpf.shipper import BatchShipper, UdpFanout
from formats.auth import FrameKind
from formats.int_md import HOST_RECORD_DTYPE, ROCEV2_UDP_PORT
from tests.helpers.waiting import wait_or_fail

ORIGIN = 1_000_000_000


def _records(first: int, n: int, flows: int) -> np.ndarray:
    """Host records of ``flows`` flows, every 7th PSN of each flow missing (lost)."""
    k = np.arange(first, first + n)
    r = np.zeros(n, HOST_RECORD_DTYPE)
    f = k % flows
    r["src_ip"], r["dst_ip"], r["orig_dport"] = 0x0A000001, 0x0A000002, ROCEV2_UDP_PORT
    r["src_port"], r["dest_qp"] = 49152 + f, 0x100 + f
    psn = k // flows
    psn = psn + psn // 6          # skips one PSN in every 7
    r["psn"], r["sample_psn"], r["psn_count"] = psn, psn, 1
    t = ORIGIN + 1000 * k
    r["capture_ns"], r["run_first_ns"], r["run_last_ns"] = t, t, t
    return r


def _collector(keys: KeyFile) -> tuple[Collector, FlowLossListener]:
    loss = FlowLossListener(stream=FlowLossStream(n_flows=64, bin_ns=1_000_000, n_bins=64,
                                                  origin_ns=ORIGIN))
    return Collector(CollectorConfig(report_port=0, agent_port=0, flow_capacity=64,
                                     keys=keys, kernel_filter=False),
                     listeners=[loss]).start(), loss


def _by_flow(col: Collector, loss: FlowLossListener) -> dict[tuple[int, int], tuple]:
    """Loss map rows keyed by flow (slots may differ between collectors)."""
    f = col.flow_snapshot()
    m = loss.stream.snapshot()
    return {(int(sp), int(qp)): (m.lost[s].tolist(), m.delivered[s].tolist(),
                                 float(loss.stream.lost_total[s]))
            for s, sp, qp in zip(f.slot, f.sport, f.dest_qp)}


def test_standby_loss_map_equals_primary_after_failover(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "keys.yaml"
    generate_key_file(path, senders=[7])
    keys = KeyFile(path)
    primary, p_loss = _collector(keys)
    standby, s_loss = _collector(keys)
    witness, w_loss = _collector(keys)     # gets everything, never fails
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fan = UdpFanout(sock, primary.agent_address,  # type: ignore[arg-type]
                        (standby.agent_address, witness.agent_address))  # type: ignore[arg-type]
        signer = Signer(keys, sender_id=7, kind=FrameKind.HOST_BATCH)
        shipper = BatchShipper(lambda d: fan(signer.seal(d)), agent_id=7,
                               record_size=HOST_RECORD_DTYPE.itemsize, batch_records=40)
        shipper.push(_records(0, 2000, 8))
        shipper.flush()
        # the listeners run after the counters: wait for the loss maps themselves
        wait_or_fail(lambda: all(x.records == 2000 for x in (p_loss, s_loss, w_loss)))
        before = _by_flow(primary, p_loss)
        assert before == _by_flow(standby, s_loss)
        assert sum(v[2] for v in before.values()) > 0     # there are losses to map
        primary.stop()                                    # failover
        shipper.push(_records(2000, 2000, 8))
        shipper.flush()
        wait_or_fail(lambda: s_loss.records == 4000 and w_loss.records == 4000)
        after = _by_flow(standby, s_loss)
        assert after == _by_flow(witness, w_loss)
        assert standby.stats().agents[0].lost_batches == 0
        assert fan.standby_errors == {standby.agent_address: 0, witness.agent_address: 0}
        assert shipper.stats.send_errors <= 1    # the primary's port may refuse
    finally:
        sock.close()
        for c in (primary, standby, witness):
            c.stop()


class _Sock:
    """sendto that refuses the primary (its host is gone) or would block."""

    def __init__(self, primary_error: type[OSError]) -> None:
        self.sent: list[tuple[str, int]] = []
        self.error = primary_error

    def setblocking(self, flag: bool) -> None:
        pass

    def sendto(self, data: bytes, addr: tuple[str, int]) -> int:
        if addr[1] == 1:
            raise self.error()
        self.sent.append(addr)
        return len(data)


def test_fanout_standbys_get_copies_when_the_primary_fails() -> None:
    s = _Sock(ConnectionRefusedError)
    fan = UdpFanout(s, ("10.0.0.1", 1), (("10.0.0.2", 2),))  # type: ignore[arg-type]
    try:
        fan(b"x")
    except ConnectionRefusedError:
        pass
    assert s.sent == [("10.0.0.2", 2)]
    s = _Sock(BlockingIOError)            # retried later, copies with it: none now
    fan = UdpFanout(s, ("10.0.0.1", 1), (("10.0.0.2", 2),))  # type: ignore[arg-type]
    try:
        fan(b"x")
    except BlockingIOError:
        pass
    assert s.sent == []


def _report_view(col: Collector) -> tuple[list[tuple], list[tuple]]:
    f = col.flow_snapshot()
    flows = sorted(zip(f.sport.tolist(), f.dest_qp.tolist(), f.samples.tolist(),
                       f.last_psn.tolist(), f.hop_count.tolist()))
    seq = [(s.node_id, s.received, s.lost, s.late) for s in col.stats().switches]
    return flows, seq


def test_standby_takes_reports_of_a_switch_with_two_destinations() -> None:
    """A switch that sends its Telemetry Reports to two collectors (the second a
    standby): the standby's flows and report sequence accounting equal the primary's
    before the failover and a never-failing collector's after it, a lost report
    counted once in each."""
    from controller.int.synth import Hop, build_hpcc_report

    def reports(first: int, n: int) -> list[bytes]:
        return [build_hpcc_report(node_id=2, seq=k, hops=[Hop(node_id=1, egress_ts_us=k)],
                                  sport=50000 + k % 5, dest_qp=k % 5, psn=k // 5)
                for k in range(first, first + n)]

    cols = [Collector(CollectorConfig(report_port=0, agent_port=None)).start() for _ in range(3)]
    primary, standby, witness = cols
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        fan = UdpFanout(sock, primary.report_address,  # type: ignore[arg-type]
                        (standby.report_address, witness.report_address))  # type: ignore[arg-type]
        first = reports(0, 300)
        del first[123]                       # lost on the way to every collector
        for d in first:
            fan(d)
        wait_or_fail(lambda: all(int(c.flow_snapshot().samples.sum()) == 299 for c in cols))
        before = _report_view(primary)
        assert before == _report_view(standby)
        assert before[1] == [(2, 299, 1, 0)]
        primary.stop()                       # failover
        for d in reports(300, 200):
            try:
                fan(d)
            except OSError:                  # the primary's port may refuse
                pass
        wait_or_fail(lambda: all(int(c.flow_snapshot().samples.sum()) == 499
                                 for c in (standby, witness)))
        assert _report_view(standby) == _report_view(witness)
        assert _report_view(standby)[1] == [(2, 499, 1, 0)]
    finally:
        sock.close()
        for c in cols:
            c.stop()
