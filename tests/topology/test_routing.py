"""Routes, ECMP groups, neighbours and paths computed from the standard topologies."""
import pytest

from common.loss import LossModel
from controller.topology import (
    LinkRole,
    RoutingError,
    arp_proxy_entries,
    directed_links,
    dumbbell,
    ecmp_groups,
    host_configs,
    leaf_spine,
    node_names_by_id,
    path_link_indices,
    path_links,
    paths,
    pick_next_hop,
    port_configs,
    port_queue_pkts,
    port_rates_mbps,
    port_roles,
    routes,
    switch_distances,
    switch_neighbours,
    two_datacenters,
)


def table(topo, switch, aggregate=True):
    """Routes of one switch as (prefix, group id, [(port, neighbour), ...])."""
    return [(r.prefix, r.group_id, [(n.port, n.neighbour) for n in r.next_hops])
            for r in routes(topo, aggregate=aggregate)[switch]]


ROUTE_CASES = [
    # dumbbell(2): h1,h2 on s1 ports 1,2; h3 on s2 port 1; s1:3 - s2:2
    (dumbbell(2), "s1", True, [
        ("10.0.1.1/32", 0, [(1, "h1")]),
        ("10.0.1.2/32", 0, [(2, "h2")]),
        ("10.0.2.1/32", 0, [(3, "s2")]),
    ]),
    (dumbbell(2), "s2", True, [
        ("10.0.1.0/24", 0, [(2, "s1")]),
        ("10.0.2.1/32", 0, [(1, "h3")]),
    ]),
    (dumbbell(2), "s2", False, [
        ("10.0.1.1/32", 0, [(2, "s1")]),
        ("10.0.1.2/32", 0, [(2, "s1")]),
        ("10.0.2.1/32", 0, [(1, "h3")]),
    ]),
    # leaf-spine 2x2: spines s1,s2; leaves s3 (h1,h2), s4 (h3,h4); leaf uplinks 3->s1, 4->s2
    (leaf_spine(), "s3", True, [
        ("10.0.1.1/32", 0, [(1, "h1")]),
        ("10.0.1.2/32", 0, [(2, "h2")]),
        ("10.0.2.0/24", 1, [(3, "s1"), (4, "s2")]),
    ]),
    (leaf_spine(), "s1", True, [
        ("10.0.1.0/24", 0, [(1, "s3")]),
        ("10.0.2.0/24", 0, [(2, "s4")]),
    ]),
    (leaf_spine(n_leaves=3, hosts_per_leaf=1), "s5", True, [
        ("10.0.1.1/32", 1, [(2, "s1"), (3, "s2")]),
        ("10.0.2.1/32", 1, [(2, "s1"), (3, "s2")]),
        ("10.0.3.1/32", 0, [(1, "h3")]),
    ]),
    # two-dc: dc1 spines s1,s2 leaves s3,s4; dc2 spines s5,s6 leaves s7,s8; WAN s1-s5, s2-s6
    (two_datacenters(), "s1", True, [
        ("10.1.1.0/24", 0, [(1, "s3")]),
        ("10.1.2.0/24", 0, [(2, "s4")]),
        ("10.2.1.0/24", 0, [(3, "s5")]),
        ("10.2.2.0/24", 0, [(3, "s5")]),
    ]),
    (two_datacenters(), "s7", True, [
        ("10.1.1.0/24", 1, [(3, "s5"), (4, "s6")]),
        ("10.1.2.0/24", 1, [(3, "s5"), (4, "s6")]),
        ("10.2.1.1/32", 0, [(1, "h5")]),
        ("10.2.1.2/32", 0, [(2, "h6")]),
        ("10.2.2.0/24", 1, [(3, "s5"), (4, "s6")]),
    ]),
    # one spine per site, two parallel WAN links between s1 and s4: ECMP over parallel links
    (two_datacenters(n_spines=1), "s1", True, [
        ("10.1.1.0/24", 0, [(1, "s2")]),
        ("10.1.2.0/24", 0, [(2, "s3")]),
        ("10.2.1.0/24", 1, [(3, "s4"), (4, "s4")]),
        ("10.2.2.0/24", 1, [(3, "s4"), (4, "s4")]),
    ]),
]


@pytest.mark.parametrize("topo,switch,aggregate,expected", ROUTE_CASES)
def test_routes(topo, switch, aggregate, expected):
    assert table(topo, switch, aggregate) == expected


def test_next_hop_macs_rewrite_towards_next_switch_or_host():
    topo = leaf_spine()
    (r,) = [r for r in routes(topo)["s3"] if r.prefix == "10.0.2.0/24"]
    assert {n.dst_mac for n in r.next_hops} == {"02:00:00:00:00:01", "02:00:00:00:00:02"}
    assert {n.src_mac for n in r.next_hops} == {"02:00:00:00:00:03"}
    assert {n.link for n in r.next_hops} == {"s1:1-s3:3", "s2:1-s3:4"}
    (r,) = [r for r in routes(topo)["s3"] if r.prefix == "10.0.1.2/32"]
    assert r.next_hops[0].dst_mac == "00:00:0a:00:01:02" and not r.is_ecmp


def test_ecmp_groups_are_shared_by_routes():
    groups = ecmp_groups(two_datacenters())
    assert groups["s1"] == []
    (g,) = groups["s7"]
    assert g.group_id == 1 and [n.neighbour for n in g.next_hops] == ["s5", "s6"]


def test_distances():
    d = switch_distances(two_datacenters())
    assert d["s7"]["s3"] == 3 and d["s1"]["s5"] == 1 and d["s3"]["s4"] == 2


PATH_CASES = [
    (dumbbell(2), "h1", "h3", [["h1:0->s1:1", "s1:3->s2:2", "s2:1->h3:0"]]),
    (dumbbell(2), "h1", "h2", [["h1:0->s1:1", "s1:2->h2:0"]]),
    (leaf_spine(), "h1", "h4", [
        ["h1:0->s3:1", "s3:3->s1:1", "s1:2->s4:3", "s4:2->h4:0"],
        ["h1:0->s3:1", "s3:4->s2:1", "s2:2->s4:4", "s4:2->h4:0"],
    ]),
    (two_datacenters(), "h1", "h7", [
        ["h1:0->s3:1", "s3:3->s1:1", "s1:3->s5:3", "s5:2->s8:3", "s8:1->h7:0"],
        ["h1:0->s3:1", "s3:4->s2:1", "s2:3->s6:3", "s6:2->s8:4", "s8:1->h7:0"],
    ]),
    (two_datacenters(), "h1", "h1", [[]]),
]


@pytest.mark.parametrize("topo,src,dst,expected", PATH_CASES)
def test_paths(topo, src, dst, expected):
    assert [[str(h) for h in p] for p in paths(topo, src, dst)] == expected


def test_path_links_cover_both_wan_links():
    links = path_links(two_datacenters(), "h7", "h1")
    assert "s1:3-s5:3" in links and "s2:3-s6:3" in links and len(links) == 8


def test_unknown_host_suggests():
    with pytest.raises(RoutingError, match=r"no host .h7x. \(did you mean \"h7"):
        paths(leaf_spine(n_leaves=4), "h1", "h7x")


def test_neighbours_and_port_roles():
    topo = two_datacenters()
    nbrs = switch_neighbours(topo)["s1"]
    assert [(n.port, n.name, n.role) for n in nbrs] == [
        (1, "s3", LinkRole.FABRIC), (2, "s4", LinkRole.FABRIC), (3, "s5", LinkRole.WAN)]
    h = switch_neighbours(topo)["s3"][0]
    assert (h.port, h.name, h.ip, h.mac) == (1, "h1", "10.1.1.1", "00:00:0a:01:01:01")
    assert port_roles(topo)["s3"] == {1: LinkRole.HOST, 2: LinkRole.HOST, 3: LinkRole.FABRIC,
                                      4: LinkRole.FABRIC}
    topo = dumbbell(2, bottleneck_rate_mbps=10, bottleneck_queue_pkts=32)
    assert port_rates_mbps(topo)["s1"] == {1: 100.0, 2: 100.0, 3: 10.0}
    assert port_queue_pkts(topo)["s2"] == {1: 64, 2: 32}


def test_host_configs():
    cfg = host_configs(leaf_spine())["h1"]
    assert cfg.intf == "h1-eth0" and cfg.ip_cidr == "10.0.1.1/24"
    assert cfg.gateway_ip == "10.0.1.254" and cfg.gateway_mac == "02:00:00:00:00:03"
    assert cfg.arp == (("10.0.1.2", "02:00:00:00:00:03"), ("10.0.1.254", "02:00:00:00:00:03"))
    assert cfg.mtu == 1500


def test_node_ids():
    assert node_names_by_id(leaf_spine()) == {1: "s1", 2: "s2", 3: "s3", 4: "s4"}


def test_generator_parameters():
    topo = two_datacenters(wan_delay_ms=25, wan_jitter_ms=2, wan_rate_mbps=50,
                           wan_loss=[LossModel.bursty(0.01), LossModel.none()])
    wan = [ln for ln in topo.links if ln.role is LinkRole.WAN]
    assert [(ln.name, ln.delay_ms, ln.jitter_ms, ln.rate_mbps) for ln in wan] == [
        ("s1:3-s5:3", 25, 2, 50), ("s2:3-s6:3", 25, 2, 50)]
    assert wan[0].loss.mean_loss == pytest.approx(0.01) and wan[1].loss.mean_loss == 0
    assert {s.site for s in topo.switches} == {"dc1", "dc2"}
    with pytest.raises(ValueError, match="wan_loss has 1 models for 2 WAN links"):
        two_datacenters(wan_loss=[LossModel.none()])
    with pytest.raises(ValueError, match="n_leaves 1 out of range 2..16"):
        leaf_spine(n_leaves=1)
    assert len(dumbbell(8).hosts) == 9


def test_directed_links_and_path_rows_for_loss_maps():
    topo = two_datacenters()
    links = directed_links(topo)
    assert len(links) == 2 * 10  # 8 fabric + 2 WAN links, both directions
    wan = [d for d in links if d.role is LinkRole.WAN]
    assert [(d.name, d.dst_node_id, d.dst_port) for d in wan] == [
        ("s1:3->s5:3", 5, 3), ("s2:3->s6:3", 6, 3), ("s5:3->s1:3", 1, 3), ("s6:3->s2:3", 2, 3)]
    rows = path_link_indices(topo, "h1", "h7", links)
    assert [[links[i].name for i in p] for p in rows] == [
        ["s3:3->s1:1", "s1:3->s5:3", "s5:2->s8:3"],
        ["s3:4->s2:1", "s2:3->s6:3", "s6:2->s8:4"],
    ]
    keys = {(d.dst_node_id, d.dst_port) for d in links}
    assert len(keys) == len(links)  # the receiving end names a direction uniquely


def test_port_configs():
    pcs = port_configs(two_datacenters(wan_rate_mbps=50))["s1"]
    assert [(p.port, str(p.role), p.peer, p.peer_port, p.rate_mbps, p.link_seq, p.int_edge)
            for p in pcs] == [
        (1, "fabric", "s3", 3, 100.0, True, False),
        (2, "fabric", "s4", 3, 100.0, True, False),
        (3, "wan", "s5", 3, 50.0, True, False)]
    host_port = port_configs(two_datacenters())["s3"][0]
    assert (host_port.peer, host_port.int_edge, host_port.mtu) == ("h1", True, 1500)


def test_arp_proxy_entries():
    entries = arp_proxy_entries(leaf_spine())
    assert entries["s3"] == [("10.0.1.1", "02:00:00:00:00:03"), ("10.0.1.2", "02:00:00:00:00:03"),
                             ("10.0.1.254", "02:00:00:00:00:03")]
    assert entries["s1"] == []


def test_pick_next_hop_spreads_host_routes_over_ecmp_members():
    topo = leaf_spine(n_leaves=2, hosts_per_leaf=8)
    rts = [r for r in routes(topo, aggregate=False)["s3"] if r.is_ecmp]
    assert len(rts) == 8
    picks = [pick_next_hop(r).neighbour for r in rts]
    assert set(picks) == {"s1", "s2"}
    assert picks == [pick_next_hop(r).neighbour for r in rts]  # stable
    single = routes(topo)["s3"][0]
    assert pick_next_hop(single) is single.next_hops[0]
