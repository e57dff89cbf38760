"""Exporter delivery rules with in-process sinks: order, spooling, replay, rejection."""
from __future__ import annotations

import csv
import threading
from pathlib import Path

import numpy as np
import pytest

from controller.export import ConfigError, Exporter, FileSink, open_exporter, open_sink
from controller.export.errors import PermanentSinkError, TransientSinkError
from controller.export.schema import collector_lines
from controller.int import Collector, CollectorConfig
from controller.int.synth import Hop, build_hpcc_report


class FlakySink:
    kind = "flaky"

    def __init__(self) -> None:
        self.up = True
        self.got: list[str] = []
        self.refuse: str | None = None
        self.lock = threading.Lock()

    def write(self, body: bytes) -> None:
        with self.lock:
            if not self.up:
                raise TransientSinkError("down")
            text = body.decode()
            if self.refuse and self.refuse in text:
                raise PermanentSinkError("bad data")
            self.got.extend(text.splitlines())

    def close(self) -> None:
        pass


def _lines(a: int, b: int) -> list[str]:
    return [f"m v={i}i {i}" for i in range(a, b)]


def test_outage_keeps_order_and_loses_nothing(tmp_path: Path) -> None:
    sink = FlakySink()
    ex = Exporter(sink, spool_dir=tmp_path, batch_lines=7, flush_interval_s=0.02,
                  backoff_s=0.01, max_backoff_s=0.05, max_queued_batches=3)
    ex.write(_lines(0, 50))
    assert ex.flush(10)
    sink.up = False
    for k in range(10):
        ex.write(_lines(50 + 30 * k, 80 + 30 * k))
    ex.flush(0.5)  # cannot complete while down
    assert len(ex.spool) > 0 and ex.stats.send_failures > 0
    sink.up = True
    assert ex.flush(10)
    ex.close()
    assert sink.got == _lines(0, 350)
    assert ex.stats.lines_delivered == 350 and len(ex.spool) == 0


def test_spool_replayed_by_next_exporter(tmp_path: Path) -> None:
    sink = FlakySink()
    sink.up = False
    ex = Exporter(sink, spool_dir=tmp_path, batch_lines=10, flush_interval_s=0.02,
                  backoff_s=0.01, max_backoff_s=0.02)
    ex.write(_lines(0, 95))
    assert not ex.close(timeout_s=0.3)
    assert len(list(tmp_path.glob("*.lp"))) >= 1
    sink2 = FlakySink()
    ex2 = Exporter(sink2, spool_dir=tmp_path, batch_lines=10, flush_interval_s=0.02)
    ex2.write(_lines(95, 100))
    assert ex2.flush(10)
    ex2.close()
    assert sink2.got == _lines(0, 100)


def test_refused_batches_kept_apart(tmp_path: Path) -> None:
    sink = FlakySink()
    sink.refuse = "v=3i"
    with Exporter(sink, spool_dir=tmp_path, batch_lines=2, flush_interval_s=0.02) as ex:
        ex.write(_lines(0, 6))
        assert ex.flush(10)
    assert sink.got == _lines(0, 2) + _lines(4, 6)
    assert ex.stats.lines_rejected == 2
    rejected = list((tmp_path / "rejected").glob("*.lp"))
    assert len(rejected) == 1 and rejected[0].read_text().splitlines() == _lines(2, 4)


def test_file_sink_writes_lp_and_csv(tmp_path: Path) -> None:
    c = Collector(CollectorConfig(report_port=0, agent_port=0))
    for i in range(5):
        hops = [Hop(node_id=k, egress_ts_us=100 * i, tx_bytes=100 * i, queue_bytes=k * 10,
                    line_rate_mbps=1000) for k in (1, 2)]
        c.feed_reports([build_hpcc_report(node_id=2, seq=i, hops=hops, dest_qp=7)])
    lines = collector_lines(c, time_ns=10**18)
    with open_exporter(None, out_dir=tmp_path, flush_interval_s=0.02) as ex:
        ex.write(lines)
        assert ex.flush(10)
    lp = (tmp_path / "influx" / "points.lp").read_text().splitlines()
    assert lp == lines
    with (tmp_path / "csv" / "int_hop.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["switch"] for r in rows] == ["1", "2"]
    assert float(rows[0]["tx_rate_bps"]) == pytest.approx(8e6)
    with (tmp_path / "csv" / "int_flow.csv").open() as fh:
        flow = list(csv.DictReader(fh))
    assert flow[0]["path"] == "1:0>2:0" and flow[0]["bottleneck_switch"] == "2"
    with (tmp_path / "csv" / "int_report_seq.csv").open() as fh:
        assert next(iter(csv.DictReader(fh)))["received"] == "5"


def test_bad_parameters() -> None:
    with pytest.raises(ConfigError, match="must start with http"):
        open_sink("influx:8086", out_dir="x")
    with pytest.raises(ConfigError, match="batch_lines=0"):
        Exporter(FlakySink(), spool_dir="/nonexistent-never-created", batch_lines=0)


def test_rate_and_link_loss_lines(tmp_path: Path) -> None:
    from controller.export.line_protocol import parse_line
    from controller.export.schema import link_loss_lines, rate_lines

    rl = rate_lines(src_ip=np.array([0x0A000001]), dst_ip=np.array([0x0A000002]),
                    sport=np.array([4000]), dest_qp=np.array([17]), rate_bps=np.array([2.5e10]),
                    utilisation=np.array([0.9]), bottleneck_hop=np.array([2]), time_ns=5)
    p = parse_line(rl[0])
    assert p.tags == {"src": "10.0.0.1", "dst": "10.0.0.2", "sport": "4000", "qp": "17",
                      "algo": "hpcc"}
    assert p.fields == {"rate_bps": 2.5e10, "utilisation": 0.9, "bottleneck_hop": 2}
    ll = link_loss_lines(links=["s1:2-s2:1", "s2:2-s3:1"],
                         lost=np.array([[0, 3], [0, 0]]), delivered=np.array([[10, 7], [0, 5]]),
                         bin_time_ns=np.array([100, 200]))
    got = [(q.tags["link"], q.time_ns, q.fields["lost"], q.fields["loss_rate"])
           for q in map(parse_line, ll)]
    assert got == [("s1:2-s2:1", 100, 0, 0.0), ("s1:2-s2:1", 200, 3, 0.3),
                   ("s2:2-s3:1", 200, 0, 0.0)]
    sink = FileSink(tmp_path)
    sink.write(("\n".join(rl + ll) + "\n").encode())
    with (tmp_path / "csv" / "link_loss.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [r["lost"] for r in rows] == ["0", "3", "0"]
