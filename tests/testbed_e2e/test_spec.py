"""Experiment specs: presets load, sweeps expand, bad input names field and value."""
import pytest

from mininet_topos.experiment import (
    PRESETS,
    SpecError,
    apply_overrides,
    expand,
    load_spec,
    preset_path,
    spec_from_dict,
)
from mininet_topos.topologies import resolve_topology

BASE = {"name": "t", "topology": "two-dc",
        "workload": {"kind": "p2p", "hosts": ["h1", "h5"]}}


def _with(**kw):
    d = {**BASE, **kw}
    return d


@pytest.mark.parametrize("name", PRESETS)
def test_presets_load_and_fit_their_topology(name):
    specs = load_spec(preset_path(name))
    assert specs
    for s in specs:
        topo = apply_overrides(resolve_topology(s.topology), s)
        assert set(s.workload.hosts) <= set(topo.host_names)


def test_sweeps_expand_to_every_combination():
    assert [s.variant for s in load_spec(preset_path("incast_cc"))] == [
        "cc=none", "cc=dcqcn", "cc=hpcc", "cc=hpcc-sender"]
    wan = load_spec(preset_path("wan_loss"))
    assert len(wan) == 9
    assert {s.recovery for s in wan} == {"gbn", "sr", "fec"}
    one = next(s for s in wan if s.variant == "recovery=fec,p=0.05")
    assert {ov.link: ov.loss.mean_loss for ov in one.links} == {
        "s1:3-s5:3": 0.05, "s2:3-s6:3": 0.05}


@pytest.mark.parametrize("name, mtu, topology", [("demo", 4096, "two_dc_jumbo.yaml"),
                                                  ("demo_1k", 1024, "two-dc")])
def test_demo_preset_is_the_documented_experiment(name: str, mtu: int, topology: str):
    """`demo` (what `make demo` runs) at RoCE's 4 KiB MTU; `demo_1k` the same at 1 KiB."""
    (s,) = load_spec(preset_path(name))
    assert s.topology.endswith(topology) and s.workload.kind == "allreduce"
    assert s.workload.mtu == mtu and s.workload.hosts == ("h1", "h3", "h5", "h7")
    assert s.switch == "ebpf" and s.cc == "hpcc-sender"
    assert s.recovery == "fec" and s.fec == "auto"
    lossy, other = s.links
    assert lossy.link == "s1:3-s5:3" and lossy.loss.mean_loss == pytest.approx(0.01)
    assert lossy.loss.kind.value == "gilbert-elliott"
    assert lossy.rate_mbps == other.rate_mbps == 20 and other.link == "s2:3-s6:3"
    # every link carries the frames: host links above the MTU plus headers, the fabric
    # and WAN links above that plus the INT stack
    links = resolve_topology(s.topology).links
    assert min(ln.mtu for ln in links if ln.role == "host") >= mtu + 100


def test_the_demo_runs_hpcc_as_its_readme_says():
    """The settings README.md's "the demo" measured (utilisation >= 0.8 in 3 of 3 runs):
    2 x 16 MB, eta 1, T at least 40 ms, no HPCC window (the workload's 32 frames)."""
    (s,) = load_spec(preset_path("demo"))
    assert s.workload.size == "16M" and s.workload.count == 2 and s.workload.window == 32
    assert s.hpcc is not None
    assert (s.hpcc.eta, s.hpcc.min_base_rtt_s, s.hpcc.window) == (1.0, 0.04, False)


def test_overrides_change_only_the_named_link():
    s = spec_from_dict(_with(links={"s5:3-s1:3": {"delay_ms": 25, "loss": 0.02}}))
    base = resolve_topology("two-dc")
    topo = apply_overrides(base, s)
    changed = [(a, b) for a, b in zip(base.links, topo.links) if a != b]
    assert len(changed) == 1
    assert changed[0][1].delay_ms == 25 and changed[0][1].loss.p == 0.02


@pytest.mark.parametrize("raw, words", [
    (_with(cc="hpc"), ["cc", "'hpc'", "hpcc"]),
    (_with(switch="ovs"), ["switch", "'ovs'", "ebpf", "linux-router"]),
    (_with(recovry="sr"), ["unknown field", "'recovry'", "recovery"]),
    (_with(fec="8"), ["fec", "'8'", "K,M"]),
    (_with(duration_s=-1), ["duration_s", "-1", "outside"]),
    (_with(workload={"kind": "p2p", "hosts": ["h1"]}), ["workload.hosts", "at least two"]),
    (_with(workload={"kind": "p2p", "hosts": ["h1", "h1"]}), ["workload.hosts", "twice"]),
    (_with(workload={"kind": "ring", "hosts": ["h1", "h2"]}), ["workload.kind", "'ring'"]),
    (_with(workload={"kind": "p2p", "hosts": ["h1", "h2"], "size": "big"}),
     ["workload.size", "'big'"]),
    (_with(workload={"kind": "p2p", "hosts": ["h1", "h2"], "count": 1.5}),
     ["workload.count", "integer"]),
    (_with(links={"s1:3-s5:3": {"loss": {"model": "bursty", "mean": 1.5}}}),
     ["links['s1:3-s5:3'].loss.mean", "1.5"]),
    (_with(links={"s1:3-s5:3": {"delay": 3}}), ["links['s1:3-s5:3']", "'delay'", "delay_ms"]),
    ({"name": "t", "topology": "two-dc"}, ["workload", "missing"]),
    (_with(name="a b"), ["name", "'a b'"]),
    (_with(ecn={"kmin_bytes": 5000}), ["ecn", "missing", "'kmax_bytes'"]),
    (_with(ecn={"kmin_bytes": 5000, "kmax_bytes": 100, "pmax": 0.1}),
     ["ecn.kmax_bytes", "100", "below kmin_bytes (5000)"]),
    (_with(ecn={"kmin_bytes": 0, "kmax_bytes": 100, "pmax": 2}), ["ecn.pmax", "2", "outside"]),
    (_with(ecn={"kmin_bytes": 0, "kmax_bytes": 100, "p": 0.1}), ["ecn", "'p'", "pmax"]),
    (_with(hpcc={"eta": 1.5}), ["hpcc.eta", "1.5", "outside"]),
    (_with(hpcc={"max_stage": 2.5}), ["hpcc.max_stage", "integer"]),
    (_with(hpcc={"wai": 0.1}), ["hpcc", "'wai'", "w_ai"]),
    (_with(hpcc={"window": "no"}), ["hpcc.window", "'no'", "true or false"]),
    (_with(controller_max_rate="fast"), ["controller_max_rate", "'fast'", "e.g. 100M"]),
    (_with(controller_max_rate=0), ["controller_max_rate", "'0'", "outside 1K..400G"]),
])
def test_bad_specs_name_field_and_value(raw, words):
    with pytest.raises(SpecError) as exc:
        expand(raw)
    for w in words:
        assert w in str(exc.value), str(exc.value)


def test_the_ebpf_switch_kind_is_chosen_in_spec_and_cli():
    assert spec_from_dict(_with(switch="ebpf")).switch == "ebpf"
    from mininet_topos.cli import parser
    for argv in (["run", "two-dc", "--switch", "ebpf"], ["experiment", "demo", "--out", "x",
                                                         "--switch", "ebpf"],
                 ["demo", "--switch", "ebpf"]):
        assert parser().parse_args(argv).switch == "ebpf"


def test_unknown_hosts_and_links_are_caught_before_running():
    s = spec_from_dict(_with(workload={"kind": "p2p", "hosts": ["h1", "h99"]}))
    with pytest.raises(SpecError, match="no host 'h99'"):
        apply_overrides(resolve_topology("two-dc"), s)
    s = spec_from_dict(_with(links={"s1:3-s9:3": {"delay_ms": 1}}))
    with pytest.raises(SpecError, match="s1:3-s9:3"):
        apply_overrides(resolve_topology("two-dc"), s)


def test_bad_sweep_and_bad_files(tmp_path):
    with pytest.raises(SpecError, match="sweep.cc"):
        expand(_with(sweep={"cc": []}))
    with pytest.raises(SpecError, match="name a field of link"):
        expand(_with(sweep={"links.s1:3-s5:3": [1]}))
    p = tmp_path / "x.yaml"
    p.write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(p)
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.yaml")
    with pytest.raises(SpecError, match='did you mean "demo"'):
        preset_path("dem")


def test_cli_check_prints_every_variant(capsys):
    from mininet_topos.cli import main
    assert main(["check", "incast_cc"]) == 0
    out = capsys.readouterr().out
    assert out.count("ok: incast_cc") == 4
    assert main(["check", "nope"]) == 1
    assert "neither a file nor a preset" in capsys.readouterr().err


def test_ecn_profile_goes_to_the_controller_as_one_argument():
    spec = spec_from_dict(_with(ecn={"kmin_bytes": 2000, "kmax_bytes": 20000, "pmax": 0.1}))
    assert spec.ecn is not None and spec.ecn.argument == "2000:20000:0.1"
    assert spec_from_dict(BASE).ecn is None
    (none, dcqcn, hpcc, hpcc_sender) = load_spec(preset_path("incast_cc"))
    assert none.ecn == dcqcn.ecn == hpcc.ecn == hpcc_sender.ecn
    assert none.ecn is not None and none.ecn.kmax_bytes == 20000
    assert hpcc_sender.cc == "hpcc-sender"


def test_hpcc_parameters_reach_the_senders_command_line(tmp_path):
    """A spec's ``hpcc:`` becomes the traffic CLI's --hpcc-* flags, which parse back to
    the same settings; without it the senders get HPCC's documented defaults."""
    from mininet_topos.experiment.workload import traffic_argv
    from traffic.cc.hpcc import HpccSettings
    from traffic.cli import _hpcc_settings, build_parser

    raw = _with(cc="hpcc-sender", hpcc={"eta": 0.9, "max_stage": 3, "w_ai": 0.05,
                                        "min_base_rtt_s": 0.01, "multi_rate": True,
                                        "window": False, "pacing_burst_pkts": 3})
    for spec, want in ((spec_from_dict(raw), HpccSettings(
            eta=0.9, max_stage=3, w_ai_fraction=0.05, min_base_rtt_s=0.01,
            multi_rate=True, window=False, pacing_burst_pkts=3.0)),
            (spec_from_dict(_with(cc="hpcc-sender")), HpccSettings())):
        argv = traffic_argv(spec, python="python", rank=1, ips=["10.0.0.1", "10.0.0.2"],
                            out=tmp_path, control=None, start_at=0.0)
        args = build_parser().parse_args(argv[3:])
        assert _hpcc_settings(args) == want


def test_rto_floor_reaches_every_rank(tmp_path):
    """``workload.rto_min_s`` becomes the senders' --rto-min; out of range is named."""
    from mininet_topos.experiment.workload import traffic_argv
    from traffic.cli import build_parser
    from traffic.qp_types import RTO_MIN_S

    for raw_w, want in (({}, RTO_MIN_S), ({"rto_min_s": 0.1}, 0.1)):
        raw = _with(cc="hpcc-sender")
        raw["workload"] = {**raw["workload"], **raw_w}
        argv = traffic_argv(spec_from_dict(raw), python="python", rank=1,
                            ips=["10.0.0.1", "10.0.0.2"], out=tmp_path, control=None,
                            start_at=0.0)
        assert build_parser().parse_args(argv[3:]).rto_min == want
    bad = _with()
    bad["workload"] = {**bad["workload"], "rto_min_s": 0}
    with pytest.raises(SpecError, match="workload.rto_min_s"):
        spec_from_dict(bad)


def test_controller_max_rate_is_optional():
    """The spec's controller_max_rate becomes the controller's --max-rate (its effect:
    tests/testbed_e2e/test_e2e.py, the two-dc P4 test); omitted, the controller takes
    each host link's rate."""
    assert spec_from_dict(BASE).controller_max_rate is None
    assert spec_from_dict(_with(controller_max_rate="5M")).controller_max_rate == "5M"
    from mininet_topos.experiment.runner import controller_argv
    assert controller_argv(spec_from_dict(BASE)) == ()
    assert controller_argv(spec_from_dict(_with(controller_max_rate="5M"))) == ("--max-rate", "5M")
