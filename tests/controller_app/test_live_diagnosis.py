"""The running controller diagnoses faults live (``--coll-log``): its diagnosis thread
re-reads the ranks' collective logs and its own exports and puts the ranked culprits
into the state file, against real P4Runtime servers of a dumbbell topology."""
from __future__ import annotations

import time
from pathlib import Path

from ctl_app_helpers import SwitchBed

from controller.diagnose.synth import SynthFault, synth_ring
from controller.runner import Controller, RunConfig, read_state
from controller.topology.load import load_topology
from tests.helpers.waiting import wait_for
from traffic.collog.writer import CollectiveLogWriter


def _write_logs(topo_file: Path, logs: Path) -> None:
    """A ring over h1, h3, h5 whose rank 1 posts its steps late, ending now."""
    topo = load_topology(topo_file)
    fault = SynthFault(kind="straggler", target="1", onset=0.6)
    length = synth_ring(topo, ["h1", "h3", "h5"], fault).end_time - 1.7e9
    ev = synth_ring(topo, ["h1", "h3", "h5"], fault, t0=time.time() - length)
    writers: dict[int, CollectiveLogWriter] = {}
    for r in ev.records:
        w = writers.get(r.rank) or writers.setdefault(r.rank, CollectiveLogWriter(logs, r.rank))
        w.write(r)
    for w in writers.values():
        w.close()


def _top(state: dict) -> tuple[str, str, str] | None:
    d = state.get("diagnosis") or {}
    c = (d.get("culprits") or [None])[0]
    return (c["type"], c["component"], c["kind"]) if c else None


def test_state_file_names_the_straggler(testbed: SwitchBed, tmp_path: Path) -> None:
    logs = tmp_path / "collectives"
    _write_logs(testbed.topology, logs)
    out = tmp_path / "out"
    cfg = RunConfig(topology=str(testbed.topology), out_dir=str(out), report_port=0,
                    agent_port=0, status_interval_s=0.2, connect_timeout_s=1.0,
                    coll_logs=[str(logs)], diagnose_every_s=0.2)
    ctl = Controller(cfg=cfg).start()
    try:
        assert wait_for(lambda: _top(read_state(cfg.state_file)) == ("rank", "1", "straggler"),
                        timeout_s=60), read_state(cfg.state_file).get("diagnosis")
    finally:
        ctl.stop()
    st = read_state(cfg.state_file)
    assert st["diagnosis"]["errors"] == {} and st["diagnosis"]["late_ranks"] == [1]


def test_without_logs_no_diagnosis(testbed: SwitchBed, tmp_path: Path) -> None:
    cfg = RunConfig(topology=str(testbed.topology), out_dir=str(tmp_path), report_port=0,
                    agent_port=0, connect_timeout_s=1.0)
    ctl = Controller(cfg=cfg).start()
    try:
        assert ctl.live is None
    finally:
        ctl.stop()
    assert read_state(cfg.state_file)["diagnosis"] is None
