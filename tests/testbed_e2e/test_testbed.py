"""The Testbed in-process: kernel routers shaped to link rates, samples of every
switch, the CLI's show commands, and teardown of everything it created."""
import time

import pytest
from tmx_helpers import leftovers

from mininet_topos import experiment
from mininet_topos.cli import show_lines
from mininet_topos.topologies import resolve_topology

pytestmark = [pytest.mark.root, pytest.mark.mininet]


def test_testbed_shapes_samples_shows_and_cleans_up(tmp_path):
    topo = resolve_topology("dumbbell")
    with experiment.Testbed(topo=topo, switch="linux-router", logs=tmp_path / "logs",
                 sample_interval_s=0.1) as tb:
        res = tb.resources()
        h1 = tb.net.get("h1")
        assert "3 received" in h1.cmd("ping -c 3 -i 0.2 -W 1 10.0.2.1")
        # every router port is paced at its link rate in front of a FIFO of its depth
        qd = tb.net.get("s1").cmd("tc qdisc show dev s1-eth5")
        assert "htb" in qd and "limit 64" in qd, qd
        # a ping flood through the bottleneck shows up in the counters of both ends
        out = h1.cmd("ping -q -f -c 2000 -W 1 10.0.2.1")
        assert "2000 packets transmitted" in out, out
        deadline = time.monotonic() + 15  # the sampler may lag on a busy machine
        while True:
            hops = show_lines("hops", tb)
            if any(ln.startswith("s1-eth5") and int(ln.split()[-1]) > 1000 for ln in hops):
                break
            assert time.monotonic() < deadline, hops
            time.sleep(0.3)
        assert hops[0].startswith("port")
        tx = {ln.split()[0]: int(ln.split()[-1]) for ln in hops[1:]}
        assert tx["s1-eth5"] > 1000, hops
        losses = show_lines("losses", tb)
        assert any(ln.startswith("s1:5->s2:2") for ln in losses), losses
        assert "no flows" in show_lines("flows", tb)[0] or "INT" in show_lines("flows", tb)[0]
        assert "choose hops" in show_lines("nope", tb)[0]
    assert leftovers(res, str(tmp_path / "logs")) == []


def test_softswitch_testbed_programs_forwards_and_shows(tmp_path):
    """Softswitch nodes programmed by the controller: hosts reach each other, `show
    hops` reads the switches' statistics, `show flows` the controller's state."""
    topo = resolve_topology("dumbbell")
    with experiment.Testbed(topo=topo, switch="softswitch", logs=tmp_path / "logs",
                            sample_interval_s=0.2) as tb:
        res = tb.resources()
        assert "3 received" in tb.net.get("h1").cmd("ping -c 3 -i 0.2 -W 1 10.0.2.1")
        # the switches answer P4Runtime on ports chosen for this run, not the file's
        assert all(not sw.grpc_addr.endswith(f":5000{sw.device_id}") for sw in tb.topo.switches)
        time.sleep(1.2)  # one statistics interval after the pings
        hops = show_lines("hops", tb)
        assert "high water" in hops[0]
        tx = {ln.split()[0]: int(ln.split()[-1]) for ln in hops[1:]}
        assert tx["s1-eth5"] >= 3 and tx["s2-eth1"] >= 3, hops
        assert show_lines("flows", tb)
    assert leftovers(res, str(tmp_path / "logs")) == []


@pytest.mark.bpf
def test_ebpf_testbed_programs_forwards_and_leaves_no_kernel_object(tmp_path):
    """Kernel switches (``switch: ebpf``) running the INT program, programmed by the
    unchanged controller over P4Runtime, host agents on both hosts: hosts reach each
    other, every port carries the switch's program, the paced ports are shaped; after
    the test bed closes no program, map, filter, process or namespace name is left."""
    import subprocess

    from mininet_topos.ebpf_switch import kernel_objects, objects_alive

    topo = resolve_topology("dumbbell")
    with experiment.Testbed(topo=topo, switch="ebpf", logs=tmp_path / "logs",
                            sample_interval_s=0.2, agent_hosts=tuple(topo.host_names)) as tb:
        res = tb.resources()
        assert "3 received" in tb.net.get("h1").cmd("ping -c 3 -i 0.2 -W 1 10.0.2.1")
        progs: set[int] = set()
        names = set()
        for name in topo.switch_names:
            sw = tb.net.get(name)
            names.add(sw.netns_name)
            attached = sw.programs()
            assert attached and all(len(ids) == 1 for ids in attached.values()), attached
            progs |= {i for ids in attached.values() for i in ids}
            assert "htb" in sw.cmd(f"tc qdisc show dev {name}-eth1 root")
        objs = kernel_objects(progs)
        assert len(objs["prog"]) == len(topo.switch_names) and len(objs["map"]) > 20, objs
        time.sleep(1.2)  # one statistics interval after the pings
        tx = {ln.split()[0]: int(ln.split()[-1]) for ln in show_lines("hops", tb)[1:]}
        assert tx["s1-eth5"] >= 3 and tx["s2-eth1"] >= 3, tx
        ctl = (tb.logs / "controller.log").read_text()
    assert "2/2 switches ready" in ctl, ctl[-2000:]
    deadline = time.monotonic() + 5    # the kernel frees programs and maps deferred
    while objects_alive(objs) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert objects_alive(objs) == []
    left_names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                                check=False).stdout
    assert not [n for n in names if n in left_names]
    assert leftovers(res, str(tmp_path / "logs")) == []
