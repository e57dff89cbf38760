"""Real switch processes (`python -m softswitch switch`, ports in namespaces, gRPC on
127.0.0.1), real hosts in namespaces, the controller programming them from a
topology file: packets go h1 -> s1 -> s2 -> h2 with INT added by s1 and kept for the
host by s2, and after s2 restarts the controller restores it and traffic flows again."""
from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.switch_pair import SO_NO_CHECK, Bed
from tests.helpers.switch_pair import free_port as _free_port
from tests.helpers.waiting import wait_for

pytestmark = [pytest.mark.root, pytest.mark.slow]

if os.geteuid() != 0:
    pytest.skip("needs root for network namespaces", allow_module_level=True)

from controller.intent import SinkMode
from controller.p4rt import Phase
from controller.runner import Controller, RunConfig


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    b = Bed(tmp_path)
    try:
        yield b
    finally:
        b.close()


def _exchange(bed: Bed, port: int, payload: bytes, *, no_check: bool, listen: int) -> bytes | None:
    """Send one UDP datagram h1 -> h2:port; return what h2 receives on `listen`."""
    with bed.ns["h2"].enter():
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("0.0.0.0", listen))
    rx.settimeout(0.5)
    with bed.ns["h1"].enter():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    if no_check:
        tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
    try:
        for _ in range(20):     # the first ones may go to ARP resolution
            tx.sendto(payload, ("10.0.2.1", port))
            try:
                return rx.recv(4096)
            except TimeoutError:
                continue
        return None
    finally:
        tx.close()
        rx.close()


def _int_node_ids(data: bytes) -> list[int]:
    """Node IDs of the hop stack of an INT-over-UDP payload (HPCC profile, 28 B per hop)."""
    assert data[0] >> 4 == 1, "not an INT-MD shim"
    words = data[1]
    hop_words = data[4 + 2] & 0x1F
    stack = data[4 + 12: 4 + words * 4]
    n = len(stack) // (hop_words * 4)
    return [int.from_bytes(stack[i * hop_words * 4: i * hop_words * 4 + 4], "big") for i in range(n)]


def test_controller_programs_real_switch_processes_and_restores_a_restart(bed: Bed, tmp_path: Path) -> None:
    topo = bed.build()
    bed.start_switch("s1", 1)
    bed.start_switch("s2", 2)
    cfg = RunConfig(topology=str(topo), out_dir=str(tmp_path / "out"), report_port=0, agent_port=0,
                    status_interval_s=0.3, connect_timeout_s=20)
    ctl = Controller(cfg=cfg).start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values()), \
            {n: st.error for n, st in ctl.status.items()}
        # plain UDP: routed, proxy ARP answered by the switches
        assert _exchange(bed, 9000, b"hello", no_check=False, listen=9000) == b"hello"
        # RoCEv2: s1 inserts INT (UDP port 4791 -> 7777), s2 keeps it for the host
        bth = bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x33, 0, 0, 0, 1])
        got = _exchange(bed, 4791, bth + b"x" * 32, no_check=True, listen=7777)
        assert got is not None, (bed.tmp / "s1.log").read_text()[-2000:]
        assert _int_node_ids(got) == [2, 1]
        assert got.endswith(bth + b"x" * 32)

        s2 = ctl.fleet.switches["s2"]
        bed.stop_switch("s2")
        bed.start_switch("s2", 2)
        assert wait_for(lambda: ctl.restores.get("s2", 0) >= 1, timeout_s=60), s2.client.stats.stream_errors  # type: ignore[union-attr]
        assert s2.last_sync is not None and s2.last_sync.pipeline_pushed
        assert _exchange(bed, 9001, b"again", no_check=False, listen=9001) == b"again"
        time.sleep(0.5)
        ctl.tick()
        losses = {r["link"]: r["lost"] for r in ctl.snapshot()["losses"]}
        assert losses == {"s1:2->s2:2": 0, "s2:2->s1:2": 0}
    finally:
        ctl.stop()


def test_reports_from_the_p4_program_reach_the_running_controller(bed: Bed, tmp_path: Path) -> None:
    """Report mode: s2 strips INT for h2 and sends a Telemetry Report through port 3 to
    the controller's collector in the root namespace; flows, hops and HPCC feedback follow."""
    topo = bed.build()
    bed.add_collector_link()
    bed.start_switch("s1", 1)
    bed.start_switch("s2", 2)
    fb = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    fb.bind(("127.0.0.1", 0))
    fb.settimeout(5)
    cfg = RunConfig(topology=str(topo), out_dir=str(tmp_path / "out"), listen="10.0.9.1",
                    report_port=_free_port(), agent_port=0, status_interval_s=0.3, connect_timeout_s=20,
                    sink_mode=SinkMode.REPORT, collector_ip="10.0.9.1", collector_mac=bed.collector_mac,
                    collector_at=("s2", 3), report_source_base="10.0.9.100", int_instructions=0xD400,
                    agents={"h1": ("127.0.0.1", fb.getsockname()[1])},
                    key_file=str(tmp_path / "keys.yaml"))   # reports from the switches only
    from common.auth.keys import generate_key_file
    keys = generate_key_file(tmp_path / "keys.yaml")
    ctl = Controller(cfg=cfg).start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values()), \
            {n: st.error for n, st in ctl.status.items()}
        bth = bytes([0x04, 0, 0xFF, 0xFF, 0, 0, 0, 0x33, 0, 0, 0, 1])
        # report mode: h2 gets the packet as h1 sent it (INT stripped), on 4791
        got = _exchange(bed, 4791, bth + b"y" * 32, no_check=True, listen=4791)
        assert got == bth + b"y" * 32
        assert ctl.collector is not None
        assert wait_for(lambda: ctl.collector.stats().reports >= 1, timeout_s=10), ctl.collector.stats()
        with bed.ns["h1"].enter():    # one flow (one source port), several packets
            tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        tx.setsockopt(socket.SOL_SOCKET, SO_NO_CHECK, 1)
        try:
            for psn in range(2, 12):
                tx.sendto(bth[:11] + bytes([psn]) + b"y" * 32, ("10.0.2.1", 4791))
                time.sleep(0.02)
        finally:
            tx.close()
        assert wait_for(lambda: ctl.collector.stats().reports >= 11, timeout_s=10)
        ctl.tick()
        state = ctl.snapshot()
        flows = state["flows"]     # one per UDP source port (each exchange uses a new socket)
        assert flows and all((f["src"], f["dst"], f["qp"], f["path"]) == ("10.0.1.1", "10.0.2.1", 0x33, ["s1", "s2"])
                             for f in flows)
        # with ports in the INT profile (0xD400), hops are (switch, egress port)
        assert {(h["switch"], h["egress_port"]) for h in state["hops"]} == {("s1", 2), ("s2", 1)}
        assert all(h["line_rate_bps"] == 100e6 for h in state["hops"])
        assert state["collector"]["malformed"] == {} and state["collector"]["reports_lost"] == 0
        assert state["collector"]["rejected"] == {}
        # a report from anywhere but a switch's report source is dropped and counted
        forged = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        forged.sendto(b"\x20" + b"\x00" * 40, ("10.0.9.1", cfg.report_port))
        forged.close()
        assert wait_for(lambda: ctl.collector.stats().rejected == {"report_source": 1})
        from common.auth import KeyFile, KeyRing, Verifier
        from controller.cc import decode_feedback
        from formats.auth import FrameKind
        opened = Verifier(KeyFile.from_ring(KeyRing(keys=keys.keys, sign_key_id=keys.sign_key_id)),
                          kinds=(FrameKind.FEEDBACK,)).open(fb.recv(65536))
        assert opened is not None     # the feedback is sealed
        rec = decode_feedback(opened.payload)
        assert rec["flow_id"][0] == 0x33 and 0 < rec["rate_bps"][0] <= 100e6
    finally:
        ctl.stop()
        fb.close()
