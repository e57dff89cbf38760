"""The eBPF target on the XDP hook (`--hook xdp`): the project's STF tests, real frames
between namespaces in native and generic mode, the refusals, and teardown of every
XDP program it attached (after SIGTERM and after SIGKILL)."""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from ebpf_helpers import ALL_STF, INCLUDE, ROOT, RUNS_ON_EBPF

from common.kernel.netns import Interface, Namespace, veth_pair
from softswitch.backends.ebpf import EbpfUnsupported
from softswitch.backends.ebpf.kernel import object_exists
from softswitch.stf import StfRunner, parse_stf
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"
# programs of RUNS_ON_EBPF that make copies of frames (clones, multicast): tc only
TC_ONLY = {"mirror", "multicast"}


@pytest.mark.parametrize("program, test", ALL_STF, ids=[p.stem for p, _ in ALL_STF])
def test_stf_passes_on_xdp_or_is_refused_with_a_location(program: Path, test: Path) -> None:
    if program.stem not in RUNS_ON_EBPF - TC_ONLY:
        res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf", "--hook", "xdp",
                              "-I", str(INCLUDE), str(program), str(test)],
                             check=False, capture_output=True, text=True, cwd=ROOT, timeout=180)
        assert res.returncode == 2, res.stdout + res.stderr
        assert re.search(r":\d+:\d+: error: unsupported on --target ebpf: ", res.stderr) \
            or "not supported on --target ebpf" in res.stderr, res.stderr
        if program.stem in TC_ONLY:
            assert "with --hook xdp (use --hook tc)" in res.stderr, res.stderr
        return
    with Switch.from_file(program, include_dirs=[str(INCLUDE)], target="ebpf", hook="xdp") as sw:
        assert sw.kernel.hook == "xdp"
        res = StfRunner(sw, strict=True).run(parse_stf(test.read_text(), str(test)), str(test))
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked > 0


def test_stf_cli_on_the_xdp_hook() -> None:
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf", "--hook", "xdp",
                          "--dump-c", "-", str(PROGRAM), str(ROOT / "p4/examples/ipv4_forward.stf")],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=180)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "#define P4_CTX struct xdp_md" in res.stdout
    assert res.stdout.rstrip().endswith("6 packets sent, 2 checked, 0 failures")


def test_a_queue_rate_is_refused_on_a_loaded_xdp_switch() -> None:
    with Switch.from_file(PROGRAM, target="ebpf", hook="xdp") as sw:
        sw.set_queue(2, depth_pkts=32)                    # a depth alone is fine (unpaced)
        with pytest.raises(EbpfUnsupported, match="queue rate on port 2 .40 Mbit/s. with --hook xdp"):
            sw.set_queue(2, rate_bps=40e6)
        assert sw.queue_stats([2])[2]["queue_rate_bps"] == 0


# ------------------------------------------------------------------ switch process
@dataclass
class Net:
    h1: Namespace
    sw: Namespace
    h2: Namespace
    a: Interface      # h1's end
    s1: Interface     # the switch's port 1
    s2: Interface     # the switch's port 2
    b: Interface      # h2's end


@pytest.fixture
def net() -> Iterator[Net]:
    made: list[Namespace] = []
    try:
        h1, sw, h2 = (Namespace.create("tebx") for _ in range(3))
        made += [h1, sw, h2]
        for ns in made:
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1"], check=False)
            ns.run(["sysctl", "-q", "-w", "net.ipv6.conf.default.disable_ipv6=1"], check=False)
        a, s1 = veth_pair(h1, sw, prefix="tebx", addr_a="10.6.0.1/24")
        s2, b = veth_pair(sw, h2, prefix="tebx", addr_b="10.6.0.2/24")
        h1.run(["ip", "neigh", "replace", "10.6.0.2", "lladdr", b.mac, "dev", a.ifname])
        h2.run(["ip", "neigh", "replace", "10.6.0.1", "lladdr", a.mac, "dev", b.ifname])
        yield Net(h1, sw, h2, a, s1, s2, b)
    finally:
        for ns in reversed(made):
            ns.close()


def _entries(net: Net, path: Path) -> Path:
    path.write_text(
        f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a060001/32 "
        f"MyIngress.ipv4_forward(dstAddr:0x{net.a.mac.replace(':', '')}, port:1)\n"
        f"add MyIngress.ipv4_lpm hdr.ipv4.dstAddr:0x0a060002/32 "
        f"MyIngress.ipv4_forward(dstAddr:0x{net.b.mac.replace(':', '')}, port:2)\n")
    return path


def _start(net: Net, args: list[str], ready: Path) -> subprocess.Popen:
    proc = net.sw.popen([sys.executable, "-m", "softswitch", "switch", "--target", "ebpf", "--hook", "xdp",
                         "-i", f"1@{net.s1.ifname}", "-i", f"2@{net.s2.ifname}", "--log-console", *args],
                        cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)),
                        stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None:
            raise AssertionError(proc.stderr.read() if proc.stderr else "")
        assert time.monotonic() < deadline, "xdp switch not ready in 60 s"
        time.sleep(0.05)
    return proc


def _xdp(net: Net, ifname: str) -> tuple[str, int] | None:
    """(mode, program id) of the XDP program on the switch's `ifname`, None if none."""
    out = json.loads(net.sw.run(["ip", "-j", "-d", "link", "show", ifname]).stdout)[0]
    xdp = out.get("xdp")
    if not xdp:
        return None
    return {1: "native", 2: "generic"}.get(xdp["mode"], str(xdp["mode"])), int(xdp["prog"]["id"])


def _forwards(net: Net) -> None:
    res = net.h1.run(["ping", "-c", "3", "-i", "0.2", "-W", "3", "10.6.0.2"], check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "ttl=63" in res.stdout                          # the kernel program decremented the TTL
    with net.h2.enter():
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("0.0.0.0", 4444))
    rx.settimeout(3)
    with net.h1.enter():
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for i in range(50):
            msg = f"datagram {i} ".encode() * 30
            tx.sendto(msg, ("10.6.0.2", 4444))
            assert rx.recv(4096) == msg
    finally:
        rx.close()
        tx.close()


def _gone(net: Net, prog_ids: set[int], timeout_s: float = 5.0) -> None:
    """No XDP program on the switch's ports, and the programs are freed."""
    for ifname in (net.s1.ifname, net.s2.ifname):
        assert _xdp(net, ifname) is None, net.sw.run(["ip", "link", "show", ifname]).stdout
    deadline = time.monotonic() + timeout_s
    while any(object_exists("prog", i) for i in prog_ids):
        assert time.monotonic() < deadline, f"programs {prog_ids} still loaded"
        time.sleep(0.05)


def test_native_xdp_forwards_between_namespaces_and_detaches_on_sigterm(net: Net, tmp_path: Path) -> None:
    """Peers with GRO on (they take native XDP_REDIRECTs) that checksum their own frames
    (tx offload off): the switch attaches in driver mode."""
    for ns, end in ((net.h1, net.a), (net.h2, net.b)):
        ns.run(["ethtool", "-K", end.ifname, "gro", "on", "tx", "off"])
    stats = tmp_path / "stats.json"
    proc = _start(net, [str(PROGRAM), "--entries", str(_entries(net, tmp_path / "r.entries")),
                        "--grpc-server-addr", "none", "--stats-file", str(stats)], stats)
    try:
        attached = {_xdp(net, net.s1.ifname), _xdp(net, net.s2.ifname)}
        assert len(attached) == 1 and next(iter(attached))[0] == "native", attached   # one program
        _forwards(net)
        time.sleep(1.2)                                        # one statistics interval
        st = json.loads(stats.read_text())
        assert st["target"] == "ebpf" and st["tx"] >= 56 and st["no_port"] == 0, st
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        _gone(net, {pid for _, pid in attached if pid})
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_generic_fallback_names_the_peers_and_sigkill_leaves_nothing_attached(net: Net, tmp_path: Path) -> None:
    """Peers without GRO or XDP would drop native redirects: auto mode says so and runs
    generic XDP; a SIGKILLed switch's BPF links die with it, and its programs."""
    stats = tmp_path / "stats.json"
    proc = _start(net, [str(PROGRAM), "--entries", str(_entries(net, tmp_path / "r.entries")),
                        "--grpc-server-addr", "none", "--stats-file", str(stats)], stats)
    try:
        modes = {_xdp(net, net.s1.ifname), _xdp(net, net.s2.ifname)}
        assert len(modes) == 1 and next(iter(modes))[0] == "generic", modes
        _forwards(net)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        err = proc.stderr.read() if proc.stderr else ""
        assert f"veth peer {net.a.ifname} in /var/run/netns/{net.h1.name} has neither GRO nor an XDP " \
               "program" in err and "XDP in generic (skb) mode on every port" in err, err
        _gone(net, {pid for _, pid in modes if pid})
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_native_mode_is_refused_when_a_peer_would_drop_redirects(net: Net, tmp_path: Path) -> None:
    net.h1.run(["ethtool", "-K", net.a.ifname, "gro", "on", "tx", "off"])   # h2's end stays as it is
    res = net.sw.run([sys.executable, "-m", "softswitch", "switch", str(PROGRAM), "--target", "ebpf",
                      "--hook", "xdp", "--xdp-mode", "native", "-i", f"1@{net.s1.ifname}",
                      "-i", f"2@{net.s2.ifname}", "--grpc-server-addr", "none"],
                     check=False, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert res.returncode == 2, res.stderr
    assert f"--xdp-mode native: port {net.s2.ifname}: veth peer {net.b.ifname}" in res.stderr, res.stderr
    assert net.a.ifname not in res.stderr                          # that peer is fine
    assert _xdp(net, net.s1.ifname) is None and _xdp(net, net.s2.ifname) is None


def test_peer_in_the_switchs_namespace_gets_gro_for_native_mode(tmp_path: Path) -> None:
    """A veth whose peer the switch's namespace holds: the switch turns GRO on and tx
    checksum offload off there (native mode), and back when it stops."""
    made: list[Namespace] = []
    proc = None
    try:
        sw = Namespace.create("tebg")
        made.append(sw)
        p1, q1 = veth_pair(sw, sw, prefix="tebg")
        stats = tmp_path / "stats.json"
        proc = sw.popen([sys.executable, "-m", "softswitch", "switch", str(PROGRAM), "--target", "ebpf",
                         "--hook", "xdp", "-i", f"1@{p1.ifname}", "--grpc-server-addr", "none",
                         "--stats-file", str(stats)],
                        cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 60
        while not stats.exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline
            time.sleep(0.05)
        link = json.loads(sw.run(["ip", "-j", "-d", "link", "show", p1.ifname]).stdout)[0]
        assert link["xdp"]["mode"] == 1                             # native
        features = sw.run(["ethtool", "-k", q1.ifname]).stdout
        assert "generic-receive-offload: on" in features and "tx-checksumming: off" in features
        proc.terminate()
        assert proc.wait(20) == 0
        features = sw.run(["ethtool", "-k", q1.ifname]).stdout
        assert "generic-receive-offload: off" in features and "tx-checksumming: on" in features
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        for ns in made:
            ns.close()


def test_controller_pushes_pipelines_onto_the_xdp_ports(net: Net, tmp_path: Path) -> None:
    """SetForwardingPipelineConfig on the XDP hook: the program on the ports is replaced
    (one program attached at a time, the old one freed) and routes work after each push."""
    from test_ebpf_switch_process import _route

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    info = build_p4info(load_program(PROGRAM))
    sock = tmp_path / "p4rt.sock"
    proc = _start(net, ["--device-id", "3", "--grpc-server-addr", f"unix:{sock}"], sock)
    try:
        routes = [_route(info, 0x0A060001, net.a.mac, 1), _route(info, 0x0A060002, net.b.mac, 2)]
        with SwitchClient(name="s1", address=f"unix:{sock}", device_id=3) as cl:
            cl.connect()
            cl.set_pipeline(info, PROGRAM.read_bytes())
            cl.write(routes)
            first = _xdp(net, net.s1.ifname)
            assert first is not None and first == _xdp(net, net.s2.ifname)
            res = net.h1.run(["ping", "-c", "2", "-i", "0.2", "-W", "3", "10.6.0.2"], check=False)
            assert res.returncode == 0, res.stdout + res.stderr
            cl.set_pipeline(info, PROGRAM.read_bytes())        # replaces the program on the ports
            second = _xdp(net, net.s1.ifname)
            assert second is not None and second != first and second == _xdp(net, net.s2.ifname)
            _gone_prog = first[1]
            deadline = time.monotonic() + 5
            while object_exists("prog", _gone_prog):
                assert time.monotonic() < deadline, "the replaced program is still loaded"
                time.sleep(0.05)
            cl.write(routes)
            res = net.h1.run(["ping", "-c", "2", "-i", "0.2", "-W", "3", "10.6.0.2"], check=False)
            assert res.returncode == 0, res.stdout + res.stderr
        proc.terminate()
        assert proc.wait(20) == 0, proc.stderr.read() if proc.stderr else ""
        _gone(net, {second[1]})
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
