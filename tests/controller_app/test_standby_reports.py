"""A switch sends its Telemetry Reports to two controllers: real switch processes
(`python -m softswitch switch`, Python and eBPF targets) in namespaces, programmed over
P4Runtime by a primary controller (collector on 10.0.9.1) given the standby's collector
(`standby_collectors`, 10.0.9.2); a standby controller (lower election id) on 10.0.9.2.
Both receive every report, each with its own unbroken sequence, so the standby's flows
and loss view equal the primary's; after the primary stops the standby takes the
switches over and its view goes on without a gap."""
from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.switch_pair import SO_NO_CHECK, Bed, free_port
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("needs root for network namespaces", allow_module_level=True)

from controller.intent import CollectorSpec, SinkMode
from controller.p4rt import Phase
from controller.runner import Controller, RunConfig

PRIMARY_IP, STANDBY_IP = "10.0.9.1", "10.0.9.2"
BTH = bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x33, 0, 0, 0, 0])   # opcode, ..., dest QP 0x33, PSN


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    b = Bed(tmp_path, prefix="tsb")
    try:
        yield b
    finally:
        b.close()


def _config(bed: Bed, topo: Path, out: Path, ip: str, port: int, fb: socket.socket, key: Path,
            election_id: int) -> RunConfig:
    return RunConfig(topology=str(topo), out_dir=str(out), listen=ip, report_port=port, agent_port=0,
                     status_interval_s=0.3, connect_timeout_s=20, election_id=election_id,
                     sink_mode=SinkMode.REPORT, collector_ip=PRIMARY_IP, collector_mac=bed.collector_mac,
                     collector_at=("s2", 3), report_source_base="10.0.9.100",
                     standby_collectors=(CollectorSpec(ip=STANDBY_IP, mac=bed.collector_mac,
                                                       switch="s2", port=3, udp_port=port),),
                     agents={"h1": ("127.0.0.1", fb.getsockname()[1])}, key_file=str(key))


def _send(tx: socket.socket, psns: range) -> None:
    """RoCEv2 packets of one flow h1 -> h2 (one socket)."""
    for psn in psns:
        tx.sendto(BTH[:9] + psn.to_bytes(3, "big") + b"z" * 32, ("10.0.2.1", 4791))
        time.sleep(0.01)


def _view(ctl: Controller) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[tuple[int, ...]]]:
    """What the reports give a controller and must match between collectors: flows
    (path, samples, last PSN), hops (queues, rates) and each switch's report sequence
    accounting (received, lost, late, duplicates)."""
    assert ctl.collector is not None
    snap = ctl.snapshot()
    keys = ("kind", "src", "dst", "sport", "qp", "hops", "path", "samples", "last_psn")
    flows = sorted(({k: f[k] for k in keys} for f in snap["flows"]), key=lambda f: (f["src"], f["sport"]))
    # the reporting switch's own metadata is stamped as each copy leaves (one clone
    # after the other), so its tx rate differs by the gap between the copies; the
    # upstream hops' records are the packet's, the same bytes in both copies
    sink = max(h["node_id"] for h in snap["hops"]) if snap["hops"] else 0
    hops = sorted(({k: v for k, v in h.items()
                    if h["node_id"] != sink or k not in ("tx_rate_bps", "utilisation")}
                   for h in snap["hops"]), key=lambda h: (h["node_id"], h["egress_port"]))
    seq = [(s.node_id, s.received, s.lost, s.late, s.duplicates) for s in ctl.collector.stats().switches]
    return flows, hops, seq


def _reports(ctl: Controller) -> int:
    assert ctl.collector is not None
    return int(ctl.collector.stats().reports)


@pytest.mark.parametrize("target", ["python", pytest.param("ebpf", marks=pytest.mark.bpf)])
def test_standby_controller_gets_every_report_and_takes_over(bed: Bed, tmp_path: Path, target: str) -> None:
    topo = bed.build()
    bed.add_collector_link()
    subprocess.run(["ip", "addr", "add", f"{STANDBY_IP}/24", "dev", bed.root_ends[0].ifname], check=True)
    bed.start_switch("s1", 1, target=target)
    bed.start_switch("s2", 2, target=target)
    from common.auth.keys import generate_key_file
    key = tmp_path / "keys.yaml"
    generate_key_file(key)
    port = free_port()
    fbs = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(2)]
    for fb in fbs:
        fb.bind(("127.0.0.1", 0))
    with bed.ns["h1"].enter():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    primary = Controller(cfg=_config(bed, topo, tmp_path / "p", PRIMARY_IP, port, fbs[0], key, 10)).start()
    running = [primary]          # Controller.stop() is not for twice
    standby: Controller | None = None
    try:
        assert all(st.phase is Phase.READY for st in primary.status.values()), \
            {n: st.error for n, st in primary.status.items()}
        standby = Controller(cfg=_config(bed, topo, tmp_path / "s", STANDBY_IP, port, fbs[1], key, 5)).start()
        running.append(standby)
        assert standby.collector is not None
        # the report clone session of s2: one replica per collector
        sessions = primary.fleet.switches["s2"].desired.clone_sessions
        assert [r for _, r in sessions[0].replicas] == [1, 2]
        # the first packets may go to ARP resolution: wait until both collectors have one
        for _ in range(50):
            _send(tx, range(1))
            if wait_for(lambda: _reports(primary) >= 1 and _reports(standby) >= 1, timeout_s=0.5):  # type: ignore[arg-type]
                break
        assert _reports(primary) >= 1 and _reports(standby) >= 1, (primary.snapshot()["collector"],
                                                                   standby.snapshot()["collector"])
        _send(tx, range(1, 20))
        assert wait_for(lambda: _reports(primary) == _reports(standby) >= 19, timeout_s=20)  # type: ignore[arg-type]
        before = _view(primary)
        assert before == _view(standby)
        flows, hops, seq = before
        assert [(f["qp"], f["path"]) for f in flows if f["kind"] == "data"] == [(0x33, ["s1", "s2"])]
        assert {h["switch"] for h in hops} == {"s1", "s2"}
        (node, received, lost, late, dup), = seq
        assert node == 2 and received == _reports(primary) and lost == late == dup == 0
        # failover: the primary goes, the standby becomes primary on every switch
        running.remove(primary)
        primary.stop()
        assert wait_for(lambda: all(st.phase is Phase.READY for st in standby.status.values())  # type: ignore[union-attr]
                        and all(s["primary"] for s in standby.snapshot()["switches"]), timeout_s=60), \
            {n: st.error for n, st in standby.status.items()}
        n = _reports(standby)
        _send(tx, range(20, 40))
        assert wait_for(lambda: _reports(standby) >= n + 20, timeout_s=20)  # type: ignore[arg-type]
        flows, _hops, seq = _view(standby)
        (node, received, lost, late, dup), = seq
        assert node == 2 and received == _reports(standby) and lost == late == dup == 0   # no gap
        data = [f for f in flows if f["kind"] == "data"]
        assert len(data) == 1 and data[0]["last_psn"] == 39
    finally:
        for ctl in running:
            ctl.stop()
        tx.close()
        for fb in fbs:
            fb.close()
