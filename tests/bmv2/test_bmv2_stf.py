"""The project's STF files pass on real BMv2 too (tests/bmv2/bmv2_stf.py drives
``simple_switch_grpc`` over P4Runtime with the P4Info p4c wrote, packets on veths);
files using commands the driver does not run, or frames too short for a veth, are
skipped, naming them."""
from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from bmv2_helpers import ROOT, Bmv2Process, require_tools
from bmv2_stf import ETH_P_ALL, Bmv2Stf, load, ports_of, short_frames, unsupported

pytestmark = [pytest.mark.bmv2, pytest.mark.root, pytest.mark.slow]

STF_FILES = [*sorted((ROOT / "p4" / "examples").glob("*.stf")),
             *sorted((ROOT / "tests" / "conformance").glob("*.stf")),
             *sorted((ROOT / "tests" / "p4_int").glob("*.stf"))]


def _program(stf: Path) -> Path:
    own = stf.with_suffix(".p4")
    return own if own.is_file() else ROOT / "p4" / "int_rocev2.p4"


@pytest.mark.parametrize("stf", STF_FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_stf_passes_on_bmv2(stf: Path, tmp_path: Path) -> None:
    require_tools()
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    commands = load(stf)
    missing = unsupported(commands)
    if missing:
        pytest.skip(f"{stf.name} uses {', '.join(missing)}, which this STF driver does not run")
    short = short_frames(commands)
    if short:
        pytest.skip(f"{stf.name} sends frames shorter than an Ethernet header (lines "
                    f"{', '.join(map(str, short))}), which a veth cannot carry")
    failures = _run_on_bmv2(stf, commands, tmp_path)
    assert not failures, "\n".join(failures)


def test_the_driver_sees_a_wrong_expectation(tmp_path: Path) -> None:
    """The same run with one expected byte changed fails, naming the line."""
    require_tools()
    if os.geteuid() != 0:
        pytest.skip("needs root for network namespaces")
    stf = ROOT / "p4" / "examples" / "ipv4_forward.stf"
    commands = load(stf)
    first = next(c for c in commands if c.verb == "expect" and len(c.args) > 1)
    first.args[1] = "ffffffffffff"
    failures = _run_on_bmv2(stf, commands, tmp_path)
    assert len(failures) == 1 and f"ipv4_forward.stf:{first.line}: packet 1 on port" in failures[0], failures


def _run_on_bmv2(stf: Path, commands: list, tmp_path: Path) -> list[str]:
    from controller.p4rt import SwitchClient, compile_bmv2_cached, read_p4info
    from mininet_topos.netns import Namespace, veth_pair

    js, info_file = compile_bmv2_cached(_program(stf))
    p4info = read_p4info(info_file)
    sw_ns = Namespace.create("tbs")
    tester = Namespace.create("tbt")
    client = None
    bmv2 = None
    tx: dict[int, socket.socket] = {}
    try:
        for ns in (sw_ns, tester):
            for key in ("all", "default"):
                ns.run(["sysctl", "-q", "-w", f"net.ipv6.conf.{key}.disable_ipv6=1"], check=False)
        ports: dict[int, str] = {}
        for port in ports_of(commands):
            sw_end, test_end = veth_pair(sw_ns, tester, prefix="tbs", mtu=9000)
            ports[port] = sw_end.ifname
            with tester.enter():
                s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
            s.bind((test_end.ifname, 0))
            tx[port] = s
        bmv2 = Bmv2Process("s1", sw_ns, 1, ports, tmp_path)
        bmv2.start()
        client = SwitchClient(name="s1", address=bmv2.grpc_addr, device_id=1, timeout_s=10)
        client.connect(timeout_s=20)
        client.set_pipeline(p4info, js.read_bytes())
        for s in tx.values():      # nothing from before the pipeline counts
            s.setblocking(False)
            while True:
                try:
                    s.recv(65536)
                except BlockingIOError:
                    break
            s.setblocking(True)
        return Bmv2Stf(p4info, client.write, tx).run(commands, tx, stf.name)
    finally:
        if client is not None:
            client.close()
        for s in tx.values():
            s.close()
        if bmv2 is not None:
            bmv2.stop()
        tester.close()
        sw_ns.close()
