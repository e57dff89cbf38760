"""The provisionable Grafana dashboard against the export schema: every measurement,
field and tag its queries name is one the controller writes, and every query runs on
a real InfluxDB 1.x (Debian's influxd) holding one point of each measurement."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from controller.export.line_protocol import format_line
from controller.export.schema import CSV_COLUMNS, M_COLLECTOR, TAGS

DASHBOARD = Path(__file__).resolve().parents[2] / "controller" / "export" / "grafana" / \
    "int_testbed_dashboard.json"
STRING_FIELDS = {"path", "state"}
COLLECTOR_FIELDS = {"socket_drops", "reports", "host_records", "flows"}


def _queries() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    qs = [t["query"] for p in d["panels"] for t in p.get("targets", [])]
    qs += [a["query"] for a in d["annotations"]["list"] if "query" in a]
    return [q for query in qs for q in query.split(";")]


def _columns(m: str) -> set[str]:
    return set(CSV_COLUMNS.get(m, [])) | (COLLECTOR_FIELDS if m == M_COLLECTOR else set())


def test_every_query_names_what_the_controller_writes() -> None:
    qs = _queries()
    assert len(qs) >= 8
    for q in qs:
        m = re.search(r'FROM "([^"]+)"', q)
        assert m, q
        meas = m.group(1)
        assert meas in TAGS, f"{meas}: not a measurement of the schema ({q})"
        names = set(re.findall(r'"([a-z_]+)"', q)) - {meas}
        aliases = set(re.findall(r'AS "([^"]+)"', q))
        unknown = names - aliases - _columns(meas)
        assert not unknown, f"{q}: {unknown} not in {meas}'s columns {sorted(_columns(meas))}"


def _point(meas: str, t_ns: int) -> str:
    tags = {k: "x" for k in TAGS[meas]}
    fields: dict[str, object] = {c: ("x" if c in STRING_FIELDS else 1.0)
                                 for c in _columns(meas) if c != "time_ns" and c not in tags}
    if meas == "alert":
        fields["state"] = "firing"
    line = format_line(meas, tags, fields, t_ns)  # type: ignore[arg-type]
    assert line
    return line


@pytest.mark.skipif(shutil.which("influxd") is None, reason="needs Debian's influxdb (bootstrap installs it)")
def test_every_query_returns_data_on_a_real_influxdb(tmp_path: Path) -> None:
    import urllib.request

    from tests.controller_export.servers import Influxd16
    with Influxd16(tmp_path) as srv:
        srv.query("g", "CREATE DATABASE g")
        t = time.time_ns() - 10**9
        body = "\n".join(_point(m, t) for m in TAGS).encode()
        urllib.request.urlopen(urllib.request.Request(f"{srv.url}/write?db=g", data=body), timeout=10)
        for q in _queries():
            q = q.replace("$timeFilter", "time > now() - 1h").replace("$__interval", "1m")
            res = srv.query("g", q)["results"][0]
            assert "error" not in res, (q, res)
            assert res.get("series"), f"no data for {q}"
