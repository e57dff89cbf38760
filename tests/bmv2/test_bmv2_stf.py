"""The project's STF files pass on real BMv2 too (tests/bmv2/bmv2_stf.py drives
``simple_switch_grpc`` over P4Runtime with the P4Info p4c wrote), one switch per file.
A file sending into one port runs as p4c's runner runs it, its packets in pcap files
(``--use-files``: any frame size, no root); one sending into several runs over veths
(BMv2's file reader would release those frames in bursts, filling queues the file
expects empty).  Files the driver cannot run are skipped, naming why."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from bmv2_helpers import ROOT, Bmv2Process, require_tools
from bmv2_stf import (
    ETH_P_ALL,
    Bmv2Stf,
    PacketPorts,
    PcapFilePorts,
    VethPorts,
    frames_per_port,
    load,
    ports_of,
    short_frames,
    unsupported,
)

from softswitch.stf import StfCommand

pytestmark = [pytest.mark.bmv2, pytest.mark.slow]

STF_FILES = sorted(p for sub in ("p4", "tests") for p in (ROOT / sub).rglob("*.stf"))


def _program(stf: Path) -> Path:
    own = stf.with_suffix(".p4")
    return own if own.is_file() else ROOT / "p4" / "int_rocev2.p4"


@pytest.mark.parametrize("stf", STF_FILES, ids=lambda p: str(p.relative_to(ROOT).with_suffix("")))
def test_stf_passes_on_bmv2(stf: Path, tmp_path: Path) -> None:
    require_tools()
    commands = load(stf)
    missing = unsupported(commands)
    if missing:
        pytest.skip(f"{stf.name} uses {', '.join(missing)}, which this STF driver does not run")
    if len(frames_per_port(commands)) <= 1:
        failures = _run_with_files(stf, commands, tmp_path)
    elif short_frames(commands):
        pytest.skip(f"{stf.name} sends into several ports (veths needed) frames shorter than an "
                    f"Ethernet header (lines {', '.join(map(str, short_frames(commands)))})")
    else:
        failures = _run_over_veths(stf, commands, tmp_path)
    assert not failures, "\n".join(failures)


def test_the_driver_sees_a_wrong_expectation(tmp_path: Path) -> None:
    """The same run with one expected byte changed fails, naming the line."""
    require_tools()
    stf = ROOT / "p4" / "examples" / "ipv4_forward.stf"
    commands = load(stf)
    first = next(c for c in commands if c.verb == "expect" and len(c.args) > 1)
    first.args[1] = "ffffffffffff"
    failures = _run_with_files(stf, commands, tmp_path)
    assert len(failures) == 1 and f"ipv4_forward.stf:{first.line}: packet 1 on port" in failures[0], failures


def test_the_driver_sees_a_wrong_counter(tmp_path: Path) -> None:
    """A check_counter line expecting one packet more than came fails, naming the line."""
    require_tools()
    stf = ROOT / "tests" / "p4_int" / "int_source.stf"
    commands = load(stf)
    check = next(c for c in commands if c.verb == "check_counter")
    check.text = check.text.replace("== 2", "== 3")
    failures = _run_with_files(stf, commands, tmp_path)
    assert len(failures) == 1 and f"int_source.stf:{check.line}: counter" in failures[0], failures


def _run_over_veths(stf: Path, commands: list[StfCommand], tmp_path: Path) -> list[str]:
    """Real interfaces in a namespace, raw sockets on their far ends in another."""
    if os.geteuid() != 0:
        pytest.skip(f"{stf.name} sends into several ports: it runs over veths, which need root")
    from common.kernel.netns import Namespace, veth_pair

    sw_ns = Namespace.create("tbs")
    tester = Namespace.create("tbt")
    sockets: dict[int, socket.socket] = {}
    try:
        for ns in (sw_ns, tester):
            for key in ("all", "default"):
                ns.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1"], check=False)
        ifnames: dict[int, str] = {}
        for port in ports_of(commands):
            sw_end, test_end = veth_pair(sw_ns, tester, prefix="tbs", mtu=9000)
            ifnames[port] = sw_end.ifname
            with tester.enter():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((test_end.ifname, 0))
            sockets[port] = s
        bmv2 = Bmv2Process("s1", sw_ns, 1, ifnames, tmp_path)
        return _run(stf, commands, bmv2, VethPorts(sockets), before=lambda: _flush(sockets))
    finally:
        for s in sockets.values():
            s.close()
        tester.close()
        sw_ns.close()


def _flush(sockets: dict[int, socket.socket]) -> None:
    """Nothing from before the pipeline counts."""
    for s in sockets.values():
        s.setblocking(False)
        while True:
            try:
                s.recv(65536)
            except BlockingIOError:
                break


def _run_with_files(stf: Path, commands: list[StfCommand], tmp_path: Path) -> list[str]:
    ports = PcapFilePorts(tmp_path, ports_of(commands), frames_per_port(commands))
    try:
        bmv2 = Bmv2Process("s1", None, 1, ports.interfaces(), tmp_path, use_files=True)
        return _run(stf, commands, bmv2, ports)
    finally:
        ports.close()


def _run(stf: Path, commands: list[StfCommand], bmv2: Bmv2Process, ports: PacketPorts,
         before: object = None) -> list[str]:
    """Start the switch, give it p4c's pipeline for the file's program, run the file."""
    from controller.p4rt import SwitchClient, compile_bmv2_cached, read_p4info

    js, info_file = compile_bmv2_cached(_program(stf))
    p4info = read_p4info(info_file)
    client = None
    try:
        bmv2.start()
        client = SwitchClient(name="s1", address=bmv2.grpc_addr, device_id=1, timeout_s=10)
        client.connect(timeout_s=20)
        client.set_pipeline(p4info, js.read_bytes())
        if callable(before):
            before()
        return Bmv2Stf(p4info, client.write, client.read, ports).run(commands, stf.name)
    finally:
        if client is not None:
            client.close()
        bmv2.stop()
