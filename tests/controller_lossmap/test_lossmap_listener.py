"""Host-agent batches through the collector into the per-flow loss map."""
from __future__ import annotations

import numpy as np
import pytest

from controller.lossmap.listener import FlowLossListener
from controller.lossmap.stream import FlowLossStream

int_pkg = pytest.importorskip("controller.int")
records_mod = pytest.importorskip("controller.int.records")
fmt_int = pytest.importorskip("formats.int_md")
fmt_batch = pytest.importorskip("formats.agent_batch")


def host_records(sport: int, psns: list[int], t0: int) -> np.ndarray:
    r = np.zeros(len(psns), fmt_int.HOST_RECORD_DTYPE)
    r["capture_ns"] = t0 + np.arange(len(psns)) * 1000
    r["src_ip"], r["dst_ip"] = 0x0A000001, 0x0A000101
    r["src_port"], r["orig_dport"], r["dest_qp"] = sport, 4791, 0x11
    r["psn"] = psns
    r["opcode"] = 0x0A
    return r


def test_agent_batches_give_psn_gap_losses():
    assert records_mod.SOURCE_HOST == 2
    stream = FlowLossStream(n_flows=64, bin_ns=10**6, n_bins=10)
    listener = FlowLossListener(stream=stream)
    col = int_pkg.Collector(int_pkg.CollectorConfig(report_port=0, agent_port=0,
                                                    flow_capacity=64), listeners=[listener])
    top = (1 << 24) - 2
    a = host_records(49152, [top, top + 1, 2, 3, 4], 10_000)          # 0 and 1 lost (wrap)
    b = host_records(49153, [10, 11, 15, 16], 10_000)                  # 12..14 lost
    c = host_records(49152, [3, 5, 8], 20_000)                         # resend 3; 6, 7 lost
    d = [fmt_batch.encode_batch(x, agent_id=7, batch_seq=i) for i, x in enumerate((a, b, c))]
    col.feed_agent_batches(d[:2])
    col.feed_agent_batches(d[2:])
    assert listener.records == 12
    lost = stream.lost_total
    assert sorted(lost[lost > 0].tolist()) == [3.0, 4.0]  # flow b: 3; flow a: 2 + 2
    m = stream.snapshot()
    assert m.lost.sum() == 7 and m.delivered.sum() == 12


def test_reused_slot_starts_a_new_flow():
    from types import SimpleNamespace
    stream = FlowLossStream(n_flows=4, bin_ns=10**6, n_bins=4)
    listener = FlowLossListener(stream=stream)

    def batch(sport: int, psns: list[int]) -> SimpleNamespace:
        s = np.zeros(len(psns), records_mod.REPORT_DTYPE)
        s["source"], s["has_bth"], s["sport"], s["psn"] = 2, 1, sport, psns
        s["arrival_ns"] = 5
        return SimpleNamespace(samples=s)

    listener(batch(1, [100, 101, 103]), np.array([0, 0, 0]))
    assert stream.lost_total[0] == 1
    # the collector gave slot 0 to another flow whose PSNs start elsewhere
    listener(batch(2, [7, 8]), np.array([0, 0]))
    assert stream.lost_total[0] == 0 and stream.snapshot().delivered[0].sum() == 2
