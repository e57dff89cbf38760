"""A results folder exported to a real influxd 1.6 (Debian's), as INFLUX_URL does."""
import importlib.util
import json
import shutil
from pathlib import Path

import pytest
from test_analysis import _synthetic_run

from mininet_topos.experiment import ResultsDir, analyse
from mininet_topos.experiment.influx import export_summary
from mininet_topos.experiment.report import write_analysis

SERVERS = Path(__file__).resolve().parents[1] / "controller_export" / "servers.py"


def _influxd_class():
    spec = importlib.util.spec_from_file_location("tmx_export_servers", SERVERS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.Influxd16


@pytest.mark.skipif(shutil.which("influxd") is None, reason="needs influxd (Debian influxdb)")
def test_results_folder_goes_to_influxdb(tmp_path):
    topo, spec, d, true_lost, _ = _synthetic_run(tmp_path)
    a = analyse(topo, samples_dir=d, traffic_dir=tmp_path / "traffic", hosts=("h1", "h5"))
    res = ResultsDir(tmp_path / "out")
    write_analysis(res, a, meta={"name": spec.name, "variant": ""})
    with _influxd_class()(tmp_path / "influxd") as server:
        n = export_summary(server.url, res.path, spec)
        assert n > 10
        db = "int_telemetry"
        q = server.query(db, 'SELECT SUM("lost") FROM "link_loss" WHERE "link" = \'s1:3->s5:3\'')
        assert q["results"][0]["series"][0]["values"][0][1] == true_lost
        assert server.count(db, "testbed_queue", "backlog_pkts") == len(a.queue_rows)
        run = server.query(db, 'SELECT "lossy_link" FROM "testbed_run"')["results"][0]
        assert run["series"][0]["values"][0][1] == "s1:3-s5:3"
    summary = json.loads(res.file("summary.json").read_text())
    assert summary["t0_ns"] == a.t0_ns
