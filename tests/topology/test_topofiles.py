"""The committed topology files, name resolution and the Mininet topology built from them."""

import pytest

from controller.topology import LinkRole, TopologyError, leaf_spine, load_topology
from mininet_topos.topologies import (
    STANDARD_FILES,
    TOPOFILES_DIR,
    host_commands,
    main,
    mininet_topo,
    needs_emulation,
    resolve_topology,
    switch_options,
    write_topofiles,
)


@pytest.mark.parametrize("name", sorted(STANDARD_FILES))
def test_committed_files_match_generators(name):
    std = STANDARD_FILES[name]
    assert load_topology(TOPOFILES_DIR / std.file) == std.make()
    assert resolve_topology(name) == std.make()


def test_regenerated_files_are_identical(tmp_path):
    for path in write_topofiles(tmp_path):
        assert path.read_text() == (TOPOFILES_DIR / path.name).read_text(), path.name


def test_resolve_path_and_unknown_name(tmp_path):
    assert resolve_topology(TOPOFILES_DIR / "leaf_spine.yaml") == leaf_spine()
    with pytest.raises(TopologyError, match=r"'leafspine'.*did you mean \"leaf-spine\""):
        resolve_topology("leafspine")


def test_cli(capsys):
    assert main(["dumbbell"]) == 0
    assert "name: dumbbell-4" in capsys.readouterr().out
    assert main(["nope.yaml"]) == 1
    assert "cannot read topology file nope.yaml" in capsys.readouterr().err
    assert main(["leaf-spine", "--routes", "s3"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "10.0.1.1/32        port 1 -> h1",
        "10.0.1.2/32        port 2 -> h2",
        "10.0.2.0/24        port 3 -> s1, port 4 -> s2 (ECMP group 1)",
    ]
    assert main(["leaf-spine", "--routes", "s33"]) == 1
    assert 'no switch \'s33\' (did you mean "s3"?)' in capsys.readouterr().err
    assert main(["dumbbell", "--paths", "h1", "h5"]) == 0
    assert capsys.readouterr().out == "h1:0->s1:1  s1:5->s2:2  s2:1->h5:0\n"


def test_switch_options_and_host_commands():
    topo = resolve_topology("two-dc")
    opts = switch_options(topo, "s1")
    assert opts["device_id"] == 1 and opts["grpc_port"] == 50001 and opts["cpu_port"] == 510
    assert opts["queue_rates_mbps"] == {1: 100.0, 2: 100.0, 3: 100.0}
    assert [ln.name for ln in topo.links if needs_emulation(ln)] == ["s1:3-s5:3", "s2:3-s6:3"]
    from controller.topology import host_configs
    cmds = host_commands(host_configs(topo)["h1"])
    assert "ip route replace default via 10.1.1.254 dev h1-eth0" in cmds
    assert "ip neigh replace 10.1.1.254 lladdr 02:00:00:00:00:03 dev h1-eth0 nud permanent" in cmds


@pytest.mark.mininet
def test_mininet_topo_structure():
    topo = resolve_topology("two-dc")
    mn = mininet_topo(topo, wan_seed=1)
    assert sorted(mn.switches()) == sorted(topo.switch_names)
    assert sorted(mn.hosts()) == sorted(topo.host_names)
    assert mn.nodeInfo("s3")["device_id"] == 3
    assert mn.nodeInfo("h1")["ip"] == "10.1.1.1/24"
    wan_links = [info for _, _, info in mn.links(withInfo=True) if "wan" in info]
    assert len(wan_links) == 2
    w = wan_links[0]["wan"]
    assert (w.delay_ms, w.rate_mbps) == (10.0, 0.0)  # the switches pace the ports
    assert len({info["wan"].seed for info in wan_links}) == 2  # independent loss per link
    plain = [info for _, _, info in mn.links(withInfo=True) if "wan" not in info]
    assert {(i["node1"], i["port1"]) for i in plain} >= {("h1", 0), ("s1", 1)}
    assert sum(ln.role is LinkRole.WAN for ln in topo.links) == 2
