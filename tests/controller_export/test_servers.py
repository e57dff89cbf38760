"""Export into real servers started here: influxd 1.6.7 (/write) and victoria-metrics
(/api/v2/write through influxdb-client), each with an outage in the middle."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
from servers import INFLUXD, VICTORIA, Influxd16, VictoriaMetrics, have

from controller.export import CollectorExport, ServerKind, open_exporter, probe
from controller.export.runner import InfluxTarget, ProbingSink
from controller.int import Collector, CollectorConfig
from controller.int.synth import Hop, build_hpcc_report

pytestmark = pytest.mark.slow

needs_influxd = pytest.mark.skipif(not have(INFLUXD), reason="needs influxd (Debian package influxdb)")
needs_vm = pytest.mark.skipif(not have(VICTORIA), reason="needs victoria-metrics (Debian package)")


def _points(a: int, b: int, t0: int) -> list[str]:
    return [f"tco_test,run=x v={i}i {t0 + i * 1_000_000}" for i in range(a, b)]


def _wait(pred, timeout: float = 30.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.2)
    return False


def _outage(server, tmp_path: Path, count) -> None:  # type: ignore[no-untyped-def]
    t0 = time.time_ns() - 10**9 * 60
    ex = open_exporter(server.url, out_dir=tmp_path / "out", target=InfluxTarget(database="tco"),
                       batch_lines=100, flush_interval_s=0.05, backoff_s=0.05, max_backoff_s=0.4)
    try:
        ex.write(_points(0, 500, t0))
        assert ex.flush(30), ex.stats
        server.stop()
        ex.write(_points(500, 1200, t0))
        assert _wait(lambda: ex.stats.send_failures > 0 and len(ex.spool) > 0, 15), ex.stats
        ex.write(_points(1200, 1500, t0))
        server.start()
        assert ex.flush(60), ex.stats
        assert ex.stats.lines_delivered == 1500 and ex.stats.lines_rejected == 0
    finally:
        ex.close()
    assert _wait(lambda: count() == 1500), count()


@needs_influxd
def test_influxd_16_probe_write_and_outage(tmp_path: Path) -> None:
    with Influxd16(tmp_path / "influxd") as srv:
        info = probe(srv.url)
        assert info.kind is ServerKind.INFLUX_V1_WRITE and info.version.startswith("1.6")
        _outage(srv, tmp_path, lambda: srv.count("tco", "tco_test", "v"))


@needs_vm
def test_victoria_metrics_v2_api_and_outage(tmp_path: Path) -> None:
    with VictoriaMetrics(tmp_path / "vm") as srv:
        info = probe(srv.url)
        assert info.kind is ServerKind.V2_API

        def count() -> int:
            got = srv.samples("tco_test_v")
            return len(set(next(iter(got.values()), [])))

        _outage(srv, tmp_path, count)


@needs_influxd
def test_exporter_started_while_server_down(tmp_path: Path) -> None:
    """The controller may start before the database: everything arrives once it is up."""
    srv = Influxd16(tmp_path / "influxd")
    t0 = time.time_ns() - 10**9 * 60
    ex = open_exporter(srv.url, out_dir=tmp_path / "out", target=InfluxTarget(database="tco"),
                       batch_lines=50, flush_interval_s=0.05, backoff_s=0.05, max_backoff_s=0.3)
    try:
        ex.write(_points(0, 120, t0))
        assert _wait(lambda: len(ex.spool) > 0, 10)
        assert isinstance(ex.sink, ProbingSink) and ex.sink.inner is None
        srv.start()
        assert ex.flush(60), ex.stats
        assert srv.count("tco", "tco_test", "v") == 120
    finally:
        ex.close()
        srv.stop()


@needs_influxd
def test_collector_state_into_influxd(tmp_path: Path) -> None:
    with Influxd16(tmp_path / "influxd") as srv:
        c = Collector(CollectorConfig(report_port=0, agent_port=0))
        ex = open_exporter(srv.url, out_dir=tmp_path / "out", target=InfluxTarget(database="tco"),
                           flush_interval_s=0.05)
        try:
            ce = CollectorExport(c, ex, interval_s=0.1)
            for i in range(20):
                hops = [Hop(node_id=k, egress_ts_us=1000 * i, tx_bytes=1250 * i,
                            queue_bytes=100 * k, line_rate_mbps=10) for k in (1, 2, 3)]
                c.feed_reports([build_hpcc_report(node_id=3, seq=i, hops=hops, dest_qp=i % 2)])
            assert ce.export_once() > 0
            assert ex.flush(30), ex.stats
        finally:
            ex.close()
        res = srv.query("tco", 'SELECT last("tx_rate_bps") FROM "int_hop" GROUP BY "switch"')
        series = res["results"][0]["series"]
        assert sorted(s["tags"]["switch"] for s in series) == ["1", "2", "3"]
        assert all(s["values"][0][1] == pytest.approx(10e6) for s in series)
        flows = srv.query("tco", 'SELECT "path", "samples" FROM "int_flow"')["results"][0]["series"][0]
        assert sorted(v[2] for v in flows["values"]) == [10, 10]
        assert flows["values"][0][1] == "1:0>2:0>3:0"
        seq = srv.query("tco", 'SELECT "received", "lost" FROM "int_report_seq"')["results"][0]
        assert seq["series"][0]["values"][0][1:] == [20, 0]
