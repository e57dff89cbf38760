"""The soak's parts that need no network: /proc walking, the stretched spec, the
exporter's delivery counters and the state-file keys built from them."""
import os
import subprocess
import sys
import threading

import pytest

from bench.soak import SoakConfig, SoakError, soak_spec
from bench.soak_procs import ProcTable, classify, descendants, read_usage
from controller.export.errors import TransientSinkError
from controller.export.exporter import Exporter, count_measurements
from controller.runner.app import _export_keys


@pytest.mark.parametrize(("argv", "want"), [
    (["/x/python", "-m", "softswitch", "switch", "p.p4", "--name", "s3"], ("switch", "s3")),
    (["/x/python", "-m", "controller", "run", "--topology", "t.yaml"], ("controller", "controller")),
    (["/x/python", "-m", "ebpf.agent", "--iface", "h5-eth0", "1"], ("agent", "h5")),
    (["/x/python", "-m", "traffic", "allreduce", "-o", "/r/traffic/h3.json"], ("traffic", "h3")),
    (["python3", "-m", "mininet_topos.delayline", "--a", "x1", "--b", "x2"], ("wan", "x1-x2")),
    (["/x/python", "-m", "mininet_topos.testbed.sampler", "s1=4"], ("sampler", "sampler")),
    (["/usr/bin/influxd", "run", "-config", "c"], ("influxd", "influxd")),
    (["bash", "--norc", "-is", "mininet:h1"], ("shell", "bash")),
    (["/x/python", "-m", "something.else"], ("other", "something.else")),
    ([], ("shell", "")),
])
def test_classify_command_lines(argv, want):
    assert classify(argv) == want


def test_descendants_and_usage_of_a_child_and_grandchild():
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', " \
           "'import time; time.sleep(30)']); time.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", code])
    try:
        for _ in range(100):
            kids = descendants(os.getpid())
            if p.pid in kids and len([k for k in kids if k != p.pid]) >= 1:
                break
            threading.Event().wait(0.05)
        assert p.pid in kids and len(kids) >= 2
        rss, cpu_s = read_usage(p.pid)
        assert rss > 1_000_000 and cpu_s >= 0.0
        table = ProcTable(os.getpid())
        first = table.sample(0.0)
        second = table.sample(1.0)
        ours = [s for s in second if s.pid == p.pid]
        assert ours and ours[0].kind == "other" and ours[0].rss_bytes > 0
        assert {s.pid for s in first} >= {p.pid}
    finally:
        for pid in descendants(p.pid):
            os.kill(pid, 9)
        p.kill()
        p.wait()
    assert read_usage(p.pid) is None


def test_soak_spec_stretches_the_demo_workload():
    spec = soak_spec(10)
    assert spec.name == "soak-demo" and spec.workload.kind == "allreduce"
    assert spec.workload.timeout_s == 600.0 and spec.duration_s == 600.0
    assert spec.workload.count == 1_000_000
    assert spec.cc == "hpcc-sender" and spec.recovery == "fec" and spec.links  # the demo's


def test_soak_config_rejects_bad_options():
    with pytest.raises(SoakError, match="--minutes 0: outside"):
        SoakConfig(minutes=0)
    with pytest.raises(SoakError, match="--influx 'localhost:8086'"):
        SoakConfig(influx_url="localhost:8086")
    assert SoakConfig(minutes=0.5).warmup == pytest.approx(6.0)
    assert SoakConfig(minutes=10).warmup == 60.0


def test_count_measurements_reads_names_with_escapes():
    body = (b"int_hop,switch=1 q=1i 5\nlink_loss,link=a lost=1i 3\nint_hop q=2i 4\n"
            b"my\\ m,t=1 a=1 7\nbare a=1\n")
    assert count_measurements(body) == {"int_hop": 2, "link_loss": 1, "my m": 1, "bare": 1}


class _FlakySink:
    """Fails until ``up`` is set, then keeps what it gets."""

    kind = "test sink"

    def __init__(self):
        self.up = threading.Event()
        self.bodies = []

    def write(self, body):
        if not self.up.is_set():
            raise TransientSinkError("down")
        self.bodies.append(body)

    def close(self):
        pass


def test_exporter_queue_depths_and_delivered_per_measurement(tmp_path):
    sink = _FlakySink()
    exp = Exporter(sink, spool_dir=tmp_path / "spool", batch_lines=2, flush_interval_s=0.05,
                   backoff_s=0.05, max_backoff_s=0.1)
    try:
        exp.write(["int_hop,switch=1 q=1i 1", "int_hop,switch=2 q=1i 1", "cc_rate r=1 1"])
        threading.Event().wait(0.4)
        q = exp.queue_stats()
        assert q["spool_batches"] >= 1 and q["spool_bytes"] > 0
        assert q["spool_lines"] + q["queued_lines"] + q["buffered_lines"] == 3
        keys = _export_keys(exp)
        assert keys["export_lines_written"] == 3 and keys["export_lines_delivered"] == 0
        assert keys["export_send_failures"] >= 1
        sink.up.set()
        assert exp.flush(timeout_s=10)
        assert exp.stats.delivered_by_measurement == {"int_hop": 2, "cc_rate": 1}
        q = exp.queue_stats()
        assert q == {"buffered_lines": 0, "queued_batches": 0, "queued_lines": 0,
                     "spool_batches": 0, "spool_lines": 0, "spool_bytes": 0}
        keys = _export_keys(exp)
        assert keys["export_delivered_by_measurement"] == {"int_hop": 2, "cc_rate": 1}
        assert keys["export_spool_batches"] == 0
    finally:
        exp.close(timeout_s=2)


class _FakeServer:
    def __init__(self):
        self.calls = []

    def stop(self):
        self.calls.append("stop")

    def start(self):
        self.calls.append("start")


def test_outage_stops_then_restarts_once():
    from bench.soak import Outage

    srv = _FakeServer()
    o = Outage(server=srv, at_s=10.0, duration_s=5.0)
    assert [o.tick(t) for t in (0.0, 9.9)] == [None, None]
    assert "stopped for 5 s" in o.tick(10.2)
    assert o.tick(14.0) is None
    assert o.tick(15.3) == "influxd started again"
    assert [o.tick(t) for t in (20.0, 30.0)] == [None, None]
    assert srv.calls == ["stop", "start"]
    assert o.summary() == {"planned_s": 5.0, "stopped_at_s": 10.2, "restarted_at_s": 15.3}


def test_outage_options_are_checked():
    with pytest.raises(SoakError, match="--outage 40: outside 0..30 s"):
        SoakConfig(minutes=1, outage_s=40)
    with pytest.raises(SoakError, match="leave out --influx"):
        SoakConfig(minutes=1, outage_s=5, influx_url="http://127.0.0.1:8086")
