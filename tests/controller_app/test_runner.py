"""The running controller in-process against real P4Runtime servers: telemetry in,
HPCC feedback out, state for `show`, a switch restarting, a switch coming up late,
link losses from counters and digests, export files."""
from __future__ import annotations

import socket
import struct
from pathlib import Path

import numpy as np
import pytest
from ctl_app_helpers import SwitchBed

from controller.cc import decode_feedback
from controller.int.synth import Hop, build_hpcc_report
from controller.p4rt import Phase
from controller.runner import Controller, RunConfig, format_view, read_state
from tests.helpers.waiting import wait_for


def _cfg(bed: SwitchBed, out: Path, **kw: object) -> RunConfig:
    return RunConfig(topology=str(bed.topology), out_dir=str(out), report_port=0, agent_port=0,
                     status_interval_s=0.2, connect_timeout_s=1.0, **kw)  # type: ignore[arg-type]


def _reports(n: int) -> list[bytes]:
    """Reports from sink s2 for h1 -> h5 (QP 0x33): s1 is the source hop, the s1->s2
    link is 60 % busy with a standing queue."""
    out = []
    for i in range(n):
        ts = 1000 + 100 * i                       # µs
        tx = (0xFFFFF000 + i * 750) & 0xFFFFFFFF  # 750 B per 100 µs = 60 Mbit/s, wrapping
        s1 = Hop(node_id=1, egress_ts_us=ts, tx_bytes=tx, queue_bytes=20_000, queue_pkts=14,
                 line_rate_mbps=100)
        s2 = Hop(node_id=2, egress_port=1, egress_ts_us=ts + 5, tx_bytes=tx, queue_bytes=0,
                 line_rate_mbps=100)
        out.append(build_hpcc_report(node_id=2, seq=i, hops=[s1], sink=s2, src_ip="10.0.1.1",
                                     dst_ip="10.0.2.1", sport=50000, dest_qp=0x33, psn=i))
    return out


def test_telemetry_feedback_and_show(testbed: SwitchBed, tmp_path: Path) -> None:
    fb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fb.bind(("127.0.0.1", 0))
    fb.settimeout(10)
    ctl = Controller(cfg=_cfg(testbed, tmp_path, agents={"h1": ("127.0.0.1", fb.getsockname()[1])}))
    ctl.start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values())
        assert ctl.collector is not None and ctl.collector.report_address is not None
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for d in _reports(12):
            tx.sendto(d, ctl.collector.report_address)
        tx.close()
        assert wait_for(lambda: ctl.collector.stats().reports >= 12)  # type: ignore[union-attr]
        rec = decode_feedback(fb.recv(65536))
        assert rec["flow_id"][0] == 0x33 and 0 < rec["rate_bps"][0] <= 100e6
        ctl.tick()
        state = read_state(ctl.cfg.state_file)
        assert state["running"] is True
        loop = state["collector"]["loop_telemetry_to_sent_s"]   # telemetry arrival -> feedback sent
        assert loop["count"] >= 1 and 0 <= loop["p50"] <= loop["max"] < 5
        (flow,) = state["flows"]
        assert (flow["src"], flow["dst"], flow["qp"], flow["path"]) == ("10.0.1.1", "10.0.2.1", 0x33, ["s1", "s2"])
        assert flow["rate_bps"] is not None and flow["rate_bps"] > 0
        hops = {(h["switch"], h["egress_port"]): h for h in state["hops"]}
        assert set(hops) == {("s1", 0), ("s2", 1)}    # HPCC profile: no port in transit hops
        assert hops[("s1", 0)]["utilisation"] == pytest.approx(0.6, rel=0.01)
        assert hops[("s1", 0)]["qlen_bytes"] == 20_000
        table = format_view("flows", state).splitlines()
        assert table[0].split()[:5] == ["src", "dst", "sport", "qp", "hops"]
        assert table[1].split()[:5] == ["10.0.1.1", "10.0.2.1", "50000", "51", "2"]
        assert "s1>s2" in table[1]
        assert format_view("hops", state).splitlines()[1].split()[0] in ("s1", "s2")
    finally:
        assert ctl.stop()
        assert ctl.stop()   # a second stop (signal handler + finally) returns the first's result
        fb.close()
    lp = (tmp_path / "influx" / "points.lp").read_text()
    assert "int_flow," in lp and "cc_rate," in lp
    assert read_state(ctl.cfg.state_file)["running"] is False


def test_restarted_switch_is_restored_and_its_neighbour_resynced(testbed: SwitchBed, tmp_path: Path) -> None:
    ctl = Controller(cfg=_cfg(testbed, tmp_path)).start()
    try:
        s1, s2 = ctl.fleet.switches["s1"], ctl.fleet.switches["s2"]
        reg = s1.schema.register("SwitchIngress.link_rx_expected").id
        tx_reg = s1.schema.register("SwitchEgress.link_tx_seq").id
        s1.client.write_register(reg, 5, 77, 32)  # type: ignore[union-attr]
        s1.client.write_register(tx_reg, 5, 55, 32)  # type: ignore[union-attr]
        held = len(s2.client.read_table_entries())  # type: ignore[union-attr]
        testbed.restart("s2")
        assert wait_for(lambda: ctl.restores.get("s2", 0) >= 1, timeout_s=15)
        assert s2.last_sync is not None and s2.last_sync.pipeline_pushed
        assert len(s2.client.read_table_entries()) == held  # type: ignore[union-attr]
        # the new s2 streams loss digests again
        for seq in (0, 1, 4):
            testbed.devices["s2"].inject(2, _link_frame(seq))  # type: ignore[attr-defined]
        assert wait_for(lambda: s2.client.stats.digests >= 1)  # type: ignore[union-attr]
        # s2's sequence numbers start again at 0: s1 must expect 0 on the port facing s2
        assert wait_for(lambda: s1.client.read_register(reg, 5) == {5: 0})  # type: ignore[union-attr]
        # ... and s1 numbers what it sends to s2 from 0 again
        assert wait_for(lambda: s1.client.read_register(tx_reg, 5) == {5: 0})  # type: ignore[union-attr]
    finally:
        ctl.stop()


def test_switch_coming_up_late_is_programmed(testbed: SwitchBed, tmp_path: Path) -> None:
    testbed.stop("s2")
    ctl = Controller(cfg=_cfg(testbed, tmp_path)).start()
    try:
        assert ctl.status["s2"].phase is Phase.FAILED and "unreachable" in ctl.status["s2"].error
        testbed.start("s2")
        assert wait_for(lambda: ctl.status["s2"].phase is Phase.READY, timeout_s=20)
        assert len(ctl.fleet.switches["s2"].client.read_table_entries()) == 15  # type: ignore[union-attr]
    finally:
        ctl.stop()


def _link_frame(seq: int) -> bytes:
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    inner = bytes(IP(src="10.0.1.1", dst="10.0.2.1", ttl=64) / UDP(sport=1234, dport=5000) / (b"x" * 20))
    eth = bytes(Ether(dst="02:00:00:00:00:02", src="02:00:00:00:00:01", type=0x88B5))[:14]
    return eth + struct.pack("!IH", seq, 0x0800) + inner


def test_link_losses_from_counters_and_digests(testbed: SwitchBed, tmp_path: Path) -> None:
    ctl = Controller(cfg=_cfg(testbed, tmp_path)).start()
    try:
        dev = testbed.devices["s2"]
        for seq in (0, 1, 2, 6, 7, 9):    # 3 + 1 lost on s1:5 -> s2:2
            outs = dev.inject(2, _link_frame(seq))  # type: ignore[attr-defined]
            assert outs and outs[0][0] == 1   # routed to h5 by the controller's entries
        assert wait_for(lambda: ctl.fleet.switches["s2"].client.stats.digests >= 2)  # type: ignore[union-attr]
        ctl.tick()
        state = read_state(ctl.cfg.state_file)
        losses = {r["link"]: r["lost"] for r in state["losses"]}
        assert losses == {"s1:5->s2:2": 4, "s2:2->s1:5": 0}
        assert ctl.links is not None and ctl.links.events == 2
        lost = ctl.links.stream.snapshot().lost
        assert int(np.sum(lost[ctl.links._rows[("s2", 2)]])) == 4
    finally:
        ctl.stop()


def test_collector_port_in_use_is_a_run_error(testbed: SwitchBed, tmp_path: Path) -> None:
    from controller.runner import RunError
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind(("127.0.0.1", 0))
    try:
        cfg = RunConfig(topology=str(testbed.topology), out_dir=str(tmp_path),
                        report_port=busy.getsockname()[1], agent_port=0)
        ctl = Controller(cfg=cfg)
        with pytest.raises(RunError, match=f"collector on 127.0.0.1:{busy.getsockname()[1]}"):
            ctl.start()
        ctl.stop()
    finally:
        busy.close()


def test_fec_from_link_losses_goes_to_the_sender(testbed: SwitchBed, tmp_path: Path) -> None:
    fb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fb.bind(("127.0.0.1", 0))
    fb.settimeout(0.5)
    ctl = Controller(cfg=_cfg(testbed, tmp_path, fec_target_residual=1e-6,
                              agents={"h1": ("127.0.0.1", fb.getsockname()[1])}))
    ctl.start()
    try:
        dev = testbed.devices["s2"]
        for seq in [s for s in range(300) if s % 50 != 7]:   # 1 in 50 lost on s1:5 -> s2:2
            dev.inject(2, _link_frame(seq))  # type: ignore[attr-defined]
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for d in _reports(4):
            tx.sendto(d, ctl.collector.report_address)  # type: ignore[union-attr]
        tx.close()
        assert wait_for(lambda: ctl.collector.stats().reports >= 4)  # type: ignore[union-attr]
        ctl.tick()
        assert ctl.fec_records >= 1
        fec = None
        for _ in range(10):
            try:
                rec = decode_feedback(fb.recv(65536))
            except TimeoutError:
                break
            hit = rec[rec["fec_k"] > 1]
            if hit.size:
                fec = hit[0]
                break
        assert fec is not None and fec["flow_id"] == 0x33 and fec["fec_m"] >= 1
    finally:
        ctl.stop()
        fb.close()
    assert (tmp_path / "link_loss_heatmap.png").stat().st_size > 1000
