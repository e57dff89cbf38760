"""Intent: the entries computed from the topology files, checked by content and
accepted by a real switch running p4/int_rocev2.p4."""
from __future__ import annotations

import pytest
from ctl_p4rt_helpers import TOPOFILES, Servers

from controller.intent import (
    CollectorSpec,
    IntentError,
    IntentOptions,
    SinkMode,
    WatchRule,
    compute_intent,
)
from controller.p4rt import (
    Fleet,
    ManagedSwitch,
    PipelineConfig,
    Schema,
    entry_to_proto,
    format_entry,
)
from controller.topology import load_topology

TOPOS = sorted(p.name for p in TOPOFILES.glob("*.yaml"))


def lines(schema: Schema, topo_file: str, switch: str, **kw: object) -> list[str]:
    topo = load_topology(TOPOFILES / topo_file)
    st = compute_intent(topo, IntentOptions(**kw))[switch]  # type: ignore[arg-type]
    return [format_entry(schema, entry_to_proto(schema, e)) for e in st.entries]


def test_dumbbell_s2_entries(schema: Schema) -> None:
    got = lines(schema, "dumbbell.yaml", "s2")
    assert "SwitchEgress.switch_config (default) -> SwitchEgress.set_switch_config(node_id=2)" in got
    # h5 is local; the four senders are behind port 2 (the bottleneck link), next hop s1
    assert ("SwitchIngress.ipv4_lpm dst_addr=10.0.2.1/32 -> SwitchIngress.ipv4_forward(port=1, "
            "src_mac=02:00:00:00:00:02, dst_mac=00:00:0a:00:02:01)") in got
    assert ("SwitchIngress.ipv4_lpm dst_addr=10.0.1.3/32 -> SwitchIngress.ipv4_forward(port=2, "
            "src_mac=02:00:00:00:00:02, dst_mac=02:00:00:00:00:01)") in got
    assert "SwitchIngress.arp_proxy target_ip=10.0.2.254 -> SwitchIngress.arp_reply(mac=02:00:00:00:00:02)" in got
    assert "SwitchEgress.fabric_port egress_port=2 -> SwitchEgress.set_fabric()" in got
    assert "SwitchEgress.fabric_port egress_port=1 -> SwitchEgress.set_fabric()" not in got
    assert "SwitchIngress.int_sink egress_port=1 -> SwitchIngress.sink_host()" in got
    assert "SwitchEgress.port_mtu egress_port=2 -> SwitchEgress.set_mtu(mtu=2000)" in got
    assert "SwitchEgress.port_line_rate port=2 -> SwitchEgress.set_line_rate(line_rate_mbps=100)" in got
    assert ("SwitchEgress.ecn_config egress_port=1 -> SwitchEgress.set_ecn_thresholds(kmin_bytes=5000, "
            "kmax_bytes=200000, pmax=655)") in got
    assert ("SwitchIngress.int_watchlist dst_port=4791&&&0xffff priority=10 -> SwitchIngress.int_source("
            "instruction_bitmap=0x9400, ds_instruction=0xe000, max_hops=8)") in got
    assert not any("report_config" in g for g in got)


def test_report_mode_points_every_switch_at_the_collector(schema: Schema) -> None:
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    d = compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(host="h4")))
    h4 = topo.host("h4")
    for name, st in d.items():
        rep = [e for e in st.entries if e.table.endswith("report_config")]
        assert len(rep) == 1 and rep[0].is_default
        params = dict(rep[0].params)
        assert params["collector_ip"] == h4.ipv4 and params["collector_port"] == 32766
        assert len(st.clone_sessions) == 1 and st.clone_sessions[0].session_id == 500
        port = st.clone_sessions[0].replicas[0][0]
        if name == h4.switch:
            assert port == h4.port and params["collector_mac"] == h4.mac.lower()
        sinks = {dict(e.match)["egress_port"]: e.action for e in st.entries if e.table.endswith("int_sink")}
        assert all(a.endswith("sink_report") for a in sinks.values())


def test_ecmp_spreads_destinations_over_spines(schema: Schema) -> None:
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    st = compute_intent(topo)["s3"]
    remote = {dict(e.params)["port"] for e in st.entries
              if e.table.endswith("ipv4_lpm") and dict(e.match)["dst_addr"].startswith("10.0.2.")}
    assert remote == {3, 4}   # two remote hosts, one per spine uplink


def test_bad_options_are_refused() -> None:
    topo = load_topology(TOPOFILES / "dumbbell.yaml")
    with pytest.raises(IntentError, match="sink mode 'report' needs a collector"):
        IntentOptions(sink_mode=SinkMode.REPORT)
    with pytest.raises(IntentError, match="instruction bitmap 0x0200 / DS 0xe000 asks for fields"):
        IntentOptions(watch=(WatchRule(instruction_bitmap=0x0200),))
    with pytest.raises(IntentError, match="collector host 'h99'"):
        compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(host="h99")))


@pytest.mark.parametrize("topo_file", TOPOS)
@pytest.mark.parametrize("mode", ["host", "report"])
def test_topology_entries_accepted_by_switches(topo_file: str, mode: str, servers: Servers,
                                               pipeline: PipelineConfig) -> None:
    topo = load_topology(TOPOFILES / topo_file)
    opts = IntentOptions(sink_mode=SinkMode(mode),
                         collector=CollectorSpec(host=topo.host_names[-1]) if mode == "report" else None)
    d = compute_intent(topo, opts)
    sws = [ManagedSwitch(name=s.name, address=servers.start(s.device_id), device_id=s.device_id,
                         pipeline=pipeline, desired=d[s.name]) for s in topo.switches]
    with Fleet(sws) as fleet:
        result = fleet.bring_up()
        assert result.ok, {k: str(v) for k, v in result.failures.items()}
        for sw in sws:
            n_plain = sum(1 for e in d[sw.name].entries if not e.is_default)
            assert len(sw.client.read_table_entries()) == n_plain  # type: ignore[union-attr]
        assert all(r.inserted + r.modified == 0 for r in fleet.sync_all().reports.values())


def test_collector_outside_the_topology_gets_routes(schema: Schema) -> None:
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    spec = CollectorSpec(ip="10.0.9.1", mac="02:aa:00:00:00:01", switch="s1", port=7)
    d = compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT, collector=spec))
    for name, st in d.items():
        to_collector = [e for e in st.entries if e.table.endswith("ipv4_lpm")
                        and dict(e.match)["dst_addr"] == "10.0.9.1/32"]
        assert len(to_collector) == 1, name
        port = dict(to_collector[0].params)["port"]
        assert st.clone_sessions[0].replicas == ((port, 1),)
    s1 = dict(next(e for e in d["s1"].entries if dict(e.match).get("dst_addr") == "10.0.9.1/32").params)
    assert (s1["port"], s1["dst_mac"]) == (7, "02:aa:00:00:00:01")
    s3 = dict(next(e for e in d["s3"].entries if dict(e.match).get("dst_addr") == "10.0.9.1/32").params)
    assert s3["dst_mac"] == "02:00:00:00:00:01"     # leaf -> spine s1's router MAC
    with pytest.raises(IntentError, match="switch 's9' not in the topology"):
        compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(
            ip="10.0.9.1", mac="02:aa:00:00:00:01", switch="s9", port=7)))


def _two_collectors() -> IntentOptions:
    return IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(host="h4"),
                         standby_collectors=(CollectorSpec(host="h1", udp_port=40000),
                                             CollectorSpec(ip="10.0.9.1", mac="02:aa:00:00:00:01",
                                                           switch="s1", port=7)))


def test_standby_collectors_get_a_replica_each(schema: Schema) -> None:
    """Replica instance 1 goes to the primary (report_config), 2, 3 to the standbys
    (report_collector keyed by the instance), each towards its own collector."""
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    d = compute_intent(topo, _two_collectors())
    h1, h4 = topo.host("h1"), topo.host("h4")
    for name, st in d.items():
        (cs,) = st.clone_sessions
        assert [rid for _, rid in cs.replicas] == [1, 2, 3], name
        to = {dict(e.match)["egress_rid"]: dict(e.params) for e in st.entries
              if e.table.endswith("report_collector")}
        assert set(to) == {2, 3}
        assert (to[2]["collector_ip"], to[2]["collector_port"]) == (h1.ipv4, 40000)
        assert (to[3]["collector_ip"], to[3]["collector_port"]) == ("10.0.9.1", 32766)
        primary = dict(next(e for e in st.entries if e.table.endswith("report_config")).params)
        assert primary["collector_ip"] == h4.ipv4
    s1 = d["s1"].clone_sessions[0].replicas
    assert s1[2] == (7, 3)                     # the outside collector hangs off s1:7
    # each collector's copy leaves by its host port at its own leaf
    assert d[h1.switch].clone_sessions[0].replicas[1] == (h1.port, 2)
    assert d[h4.switch].clone_sessions[0].replicas[0] == (h4.port, 1)


def test_standby_collectors_refused_when_ambiguous_or_too_many() -> None:
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    with pytest.raises(IntentError, match="standby collectors need a collector"):
        IntentOptions(standby_collectors=(CollectorSpec(host="h1"),))
    with pytest.raises(IntentError, match="16 report collectors, the program sends to at most 15"):
        IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(host="h4"),
                      standby_collectors=tuple(CollectorSpec(host="h1", udp_port=p) for p in range(1, 16)))
    with pytest.raises(IntentError, match="the same address and UDP port given twice"):
        compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT, collector=CollectorSpec(host="h4"),
                                           standby_collectors=(CollectorSpec(host="h4"),)))


def test_standby_collectors_accepted_by_switches(servers: Servers, pipeline: PipelineConfig) -> None:
    topo = load_topology(TOPOFILES / "leaf_spine.yaml")
    d = compute_intent(topo, _two_collectors())
    sws = [ManagedSwitch(name=s.name, address=servers.start(s.device_id), device_id=s.device_id,
                         pipeline=pipeline, desired=d[s.name]) for s in topo.switches]
    with Fleet(sws) as fleet:
        result = fleet.bring_up()
        assert result.ok, {k: str(v) for k, v in result.failures.items()}
        assert all(r.inserted + r.modified == 0 for r in fleet.sync_all().reports.values())
