"""Reading topology files and rejecting bad ones with messages that name the problem."""
import copy
import json

import pytest
import yaml

from common.loss import LossKind, LossModel
from controller.topology import (
    LinkRole,
    TopologyFormatError,
    TopologyValidationError,
    dumps_topology,
    leaf_spine,
    load_topology,
    loads_topology,
    problems,
    topology_from_dict,
    two_datacenters,
)

BASE = {
    "name": "mini",
    "switches": [
        {"name": "s1", "device_id": 1, "grpc_addr": "127.0.0.1:50001", "role": "leaf"},
        {"name": "s2", "device_id": 2, "grpc_addr": "127.0.0.1:50002", "role": "leaf"},
    ],
    "hosts": [
        {"name": "h1", "ip": "10.0.1.1/24", "mac": "00:00:0a:00:01:01", "switch": "s1",
         "port": 1},
        {"name": "h2", "ip": "10.0.2.1/24", "mac": "00:00:0a:00:02:01", "switch": "s2",
         "port": 1},
    ],
    "links": [
        {"a": "s1:3", "b": "s2:2", "role": "wan", "delay_ms": 5, "jitter_ms": 1,
         "loss": {"model": "gilbert-elliott", "p": 0.01, "r": 0.5}},
    ],
}


def mutated(path, value):
    """BASE with one field replaced; path like ("links", 0, "delay_ms")."""
    raw = copy.deepcopy(BASE)
    obj = raw
    for key in path[:-1]:
        obj = obj[key]
    if value is _DELETE:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return raw


_DELETE = object()


def test_base_loads_with_defaults_and_implicit_host_links():
    topo = topology_from_dict(BASE)
    assert [ln.name for ln in topo.links] == ["s1:3-s2:2", "h1:0-s1:1", "h2:0-s2:1"]
    wan = topo.link("s2:2-s1:3")
    assert wan.role is LinkRole.WAN and wan.delay_ms == 5.0 and wan.mtu == 2000
    assert wan.loss == LossModel.gilbert_elliott(p=0.01, r=0.5, h=0.0, k=1.0)
    host_link = topo.link_at("h1", 0)
    assert host_link.role is LinkRole.HOST and host_link.mtu == 1500
    assert topo.switch("s1").grpc_addr == "127.0.0.1:50001"
    assert topo.switch("s2").int_node_id == 2
    assert topo.host("h1").gateway_ip == "10.0.1.254"


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_round_trip_through_text(fmt):
    for topo in (topology_from_dict(BASE), leaf_spine(n_leaves=3),
                 two_datacenters(wan_loss=[LossModel.bursty(0.01, 4), LossModel.bernoulli(0.02)])):
        assert loads_topology(dumps_topology(topo, fmt=fmt), fmt=fmt) == topo


def test_load_file_json_and_yaml(tmp_path):
    (tmp_path / "t.json").write_text(json.dumps(BASE))
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(BASE))
    assert load_topology(tmp_path / "t.json") == load_topology(tmp_path / "t.yaml")
    with pytest.raises(TopologyFormatError, match="cannot read topology file .*missing.yaml"):
        load_topology(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("switches: [\n")
    with pytest.raises(TopologyFormatError, match="bad.yaml: not valid YAML"):
        load_topology(tmp_path / "bad.yaml")


def test_link_defaults_per_role():
    raw = copy.deepcopy(BASE)
    raw["link_defaults"] = {"host": {"rate_mbps": 40}, "wan": {"rate_mbps": 20}}
    topo = topology_from_dict(raw)
    assert topo.link_at("h1", 0).rate_mbps == 40.0
    assert topo.link("s1:3-s2:2").rate_mbps == 20.0


FORMAT_ERRORS = [
    (("links", 0, "delay"), 5, r"links\[0\]: unknown field 'delay' \(did you mean \"delay_ms\"\?\)"),
    (("switches", 0, "device_id"), "1", r"switch s1: field device_id must be an integer, got '1'"),
    (("switches", 0, "role"), "lef",
     (r"switch s1: field role is 'lef', expected one of leaf, spine, border"
      r" \(did you mean \"leaf\"\?\)")),
    (("hosts", 0, "port"), _DELETE, r"hosts\[0\]: missing field 'port'"),
    (("links", 0, "a"), "s1", r"a switch end needs a port \('s1:1'\)"),
    (("links", 0, "a"), "s1:x", r"port 'x' is not an integer"),
    (("links", 0, "loss"), {"model": "bernoulli", "p": 0.1, "r": 0.2},
     r"link s1:3-s2:2 loss \(bernoulli\): unknown field 'r'"),
    (("links", 0, "loss"), {"model": "gilbert"}, r"loss.model is 'gilbert'.*did you mean"),
    (("links", 0, "rate_mbps"), True, r"field rate_mbps must be a number, got True"),
    (("hosts",), {"h1": 1}, r"field hosts must be a list"),
    (("hosts", 0, "mac"), 3661, r"host h1: field mac was read as the number 3661: .*quotes"),
]


@pytest.mark.parametrize("path,value,message", FORMAT_ERRORS)
def test_format_errors(path, value, message):
    with pytest.raises(TopologyFormatError, match=message):
        topology_from_dict(mutated(path, value))


VALIDATION_ERRORS = [
    (("links", 0, "delay_ms"), 250, "link s1:3-s2:2: delay_ms 250.0 out of range 0..200"),
    (("links", 0, "delay_ms"), -1, "link s1:3-s2:2: delay_ms -1.0 out of range 0..200"),
    (("links", 0, "jitter_ms"), 6, "link s1:3-s2:2: jitter_ms 6.0 is larger than delay_ms 5.0"),
    (("links", 0, "rate_mbps"), 0, "link s1:3-s2:2: rate_mbps 0.0 out of range"),
    (("links", 0, "mtu"), 9000, "exceeds 9000-byte frames"),
    (("links", 0, "mtu"), 1600, "link s1:3-s2:2: mtu 1600 leaves no room for INT: needs >= 1740"),
    (("links", 0, "loss"), {"model": "bernoulli", "p": 1.5},
     "link s1:3-s2:2: loss bernoulli p 1.5 out of range 0..1"),
    (("links", 0, "loss"), {"model": "gilbert-elliott", "p": 0.1, "r": 0.0},
     "r is 0 with p > 0"),
    (("links", 0, "a"), "s1:1",
     "link h1:0-s1:1: port 1 of s1 used twice (also by link s1:1-s2:2)"),
    (("links", 0, "a"), "s9:1", "link s9:1-s2:2: node 's9' does not exist (did you mean"),
    (("links", 0, "a"), "s1:510", "port 510 of s1 is its cpu_port"),
    (("links", 0, "a"), "s1:511", "port 511 of s1 out of range 0..510"),
    (("links", 0, "a"), "s2:3", "both ends are on s2"),
    (("links", 0, "role"), "host", "role host but both ends are switches"),
    (("switches", 1, "device_id"), 1, "switch s2: device_id 1 used twice (also by switch s1)"),
    (("switches", 1, "name"), "s1", "switch s1: name used twice"),
    (("switches", 1, "grpc_addr"), "localhost", "grpc_addr 'localhost' is not host:port"),
    (("switches", 1, "grpc_addr"), "127.0.0.1:50001", "grpc_addr 127.0.0.1:50001 used twice"),
    (("switches", 1, "grpc_addr"), "unix:relative.sock", "grpc_addr 'unix:relative.sock' is not host:port"),
    (("switches", 0, "cpu_port"), 511, "cpu_port 511 out of range"),
    (("switches", 0, "name"), "s 1", "name must be a letter"),
    (("switches", 0, "name"), "spine_number_1", "name longer than 8 characters"),
    (("hosts", 1, "ip"), "10.0.1.1/24", "host h2: ip 10.0.1.1 used twice (also by host h1)"),
    (("hosts", 1, "ip"), "10.0.2.300", "host h2: ip '10.0.2.300' is not an IPv4 address"),
    (("hosts", 1, "ip"), "10.0.2.254/24", "host h2: ip 10.0.2.254 is also a gateway address"),
    (("hosts", 1, "ip"), "10.0.2.0/24", "network or broadcast address"),
    (("hosts", 1, "gateway"), "10.9.9.9", "host h2: gateway 10.9.9.9 is outside its subnet"),
    (("hosts", 1, "mac"), "01:00:0a:00:02:01", "host h2: mac '01:00:0a:00:02:01' is not a unicast"),
    (("hosts", 1, "mac"), "00:00:0a:00:01:01", "mac 00:00:0a:00:01:01 used twice"),
    (("hosts", 1, "switch"), "sw2", "host h2: switch 'sw2' does not exist (did you mean \"s2\"?)"),
]


@pytest.mark.parametrize("path,value,message", VALIDATION_ERRORS)
def test_validation_errors(path, value, message):
    with pytest.raises(TopologyValidationError) as info:
        topology_from_dict(mutated(path, value))
    assert any(message in p for p in info.value.problems), info.value.problems


def test_unix_socket_grpc_addr():
    """A switch in another network namespace serves P4Runtime on a Unix socket."""
    topo = topology_from_dict(mutated(("switches", 1, "grpc_addr"), "unix:/run/s2.sock"))
    assert topo.switches[1].grpc_addr == "unix:/run/s2.sock"


def test_all_problems_reported_at_once():
    raw = mutated(("links", 0, "delay_ms"), 999)
    raw["links"][0]["rate_mbps"] = -1
    with pytest.raises(TopologyValidationError) as info:
        topology_from_dict(raw)
    assert len(info.value.problems) == 2
    assert "2 problems" in str(info.value)


def test_host_link_inconsistencies():
    raw = copy.deepcopy(BASE)
    raw["links"].append({"a": "h1", "b": "s1:2"})
    assert any("host h1: says switch s1 port 1 but its link h1:0-s1:2 ends at s1:2" in p
               for p in problems(topology_from_dict(raw, check=False)))
    raw = copy.deepcopy(BASE)
    raw["links"].append({"a": "h1:1", "b": "s1:1"})
    assert any("host end h1:1 must use port 0" in p
               for p in problems(topology_from_dict(raw, check=False)))
    raw = copy.deepcopy(BASE)
    raw["links"].append({"a": "h1", "b": "h2"})
    found = problems(topology_from_dict(raw, check=False))
    assert any("joins two hosts" in p for p in found)
    raw = copy.deepcopy(BASE)
    raw["links"].append({"a": "h1", "b": "s1:1", "role": "fabric"})
    assert any("role fabric but one end is a host" in p
               for p in problems(topology_from_dict(raw, check=False)))


def test_disconnected_switch_is_reported():
    raw = copy.deepcopy(BASE)
    raw["switches"].append({"name": "s3", "device_id": 3})
    with pytest.raises(TopologyValidationError, match="node s3: not connected to s1"):
        topology_from_dict(raw)


LOSS_CASES = [
    (LossModel.none(), 0.0),
    (LossModel.bernoulli(0.02), 0.02),
    (LossModel.gilbert_elliott(p=0.01, r=0.09), 0.1),
    (LossModel.gilbert_elliott(p=0.1, r=0.1, h=0.5, k=0.9), 0.5 * 0.5 + 0.5 * 0.1),
    (LossModel.bursty(0.01, 3.0), 0.01),
    (LossModel.bursty(0.05, 1.0), 0.05),
]


@pytest.mark.parametrize("model,mean", LOSS_CASES)
def test_loss_model_mean(model, mean):
    assert model.mean_loss == pytest.approx(mean)


def test_bursty_has_requested_burst_length():
    m = LossModel.bursty(0.01, 4.0)
    assert m.kind is LossKind.GILBERT_ELLIOTT and m.r == pytest.approx(0.25)
    with pytest.raises(ValueError, match="mean_burst_pkts 0.5 must be >= 1"):
        LossModel.bursty(0.01, 0.5)


def test_unquoted_mac_in_yaml_gets_a_hint():
    text = dumps_topology(topology_from_dict(BASE)).replace("'00:00:0a:00:01:01'",
                                                              "12:34:56:00:01:01")
    with pytest.raises(TopologyFormatError, match="mac was read as the number"):
        loads_topology(text)
