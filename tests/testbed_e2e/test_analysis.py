"""Counters to loss maps, queues, results folder and plots, from synthetic node samples."""
import json

import numpy as np
import pytest

from common.kernel.shaping import ShapingError, shaping_commands
from common.loss import LossModel
from controller.topology import Topology
from mininet_topos.experiment import ResultsDir, RunError, analyse, read_csv, spec_from_dict
from mininet_topos.experiment.plots import plot_fct_cdf, plot_queues, plot_rates
from mininet_topos.experiment.report import format_summary, write_analysis
from mininet_topos.experiment.workload import flows, traffic_argv
from mininet_topos.testbed.sampler import read_proc_net_dev, read_qdiscs
from mininet_topos.testbed.telemetry import directed_links, link_counters, load_samples
from mininet_topos.topologies import resolve_topology

PROC_NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo:     100       2    0    0    0     0          0         0      100       2    0    0    0     0       0          0
s1-eth3: 1500000    1000    0    3    0     0          0         0  3000000    2000    0    4    0     0       0          0
"""
TC_JSON = json.dumps([
    {"kind": "htb", "handle": "1:", "dev": "s1-eth3", "root": True, "drops": 0, "backlog": 9000,
     "qlen": 6},
    {"kind": "pfifo", "handle": "10:", "dev": "s1-eth3", "parent": "1:1", "drops": 5,
     "backlog": 9000, "qlen": 6},
    {"kind": "noqueue", "dev": "lo", "root": True, "qlen": 0, "backlog": 0, "drops": 0},
])


def test_sampler_parses_kernel_counters_and_leaf_queues():
    assert read_proc_net_dev(PROC_NET_DEV) == {"s1-eth3": [1000, 2000, 1500000, 3000000, 3, 4]}
    assert read_qdiscs(TC_JSON) == {"s1-eth3": [6, 9000, 5]}
    assert read_qdiscs("not json") == {}


def test_shaping_commands_and_their_range_checks():
    cmds = shaping_commands("s1-eth1", 100, 64)
    assert "htb rate 100mbit" in cmds[1] and cmds[2].endswith("pfifo limit 64")
    with pytest.raises(ShapingError, match="s1-eth1: rate 0 Mbit/s"):
        shaping_commands("s1-eth1", 0, 64)
    with pytest.raises(ShapingError, match="queue 0 packets"):
        shaping_commands("s1-eth1", 10, 0)


def _write(path, t_ns, dev, q=None):
    with open(path, "w") as fh:
        fh.writelines(json.dumps({"t_ns": int(t), "dev": {k: v[i] for k, v in dev.items()},
                                 "q": {k: v[i] for k, v in (q or {}).items()}}) + "\n" for i, t in enumerate(t_ns))
        fh.write('{"t_ns": 12')  # a torn last line, as while the sampler writes


def _wan_topo(tmp_path, loss=0.01):
    topo = resolve_topology("two-dc")
    spec = spec_from_dict({"name": "t", "topology": "two-dc",
                           "links": {"s1:3-s5:3": {"loss": loss}},
                           "workload": {"kind": "p2p", "hosts": ["h1", "h5"]}})
    from mininet_topos.experiment import apply_overrides
    return apply_overrides(topo, spec), spec


def _synthetic_run(tmp_path, *, n=41, rate_pps=5000, loss=0.01, seed=3):
    """s1 sends on its WAN port 3, s5 receives (10 ms later), with Bernoulli loss."""
    rng = np.random.default_rng(seed)
    t = 1_000_000_000_000 + np.arange(n) * 200_000_000
    sent = np.concatenate([[0], np.cumsum(rng.poisson(rate_pps * 0.2, n - 1))])
    sent[-3:] = sent[-4]                      # traffic over: the last samples are drained
    lost = np.concatenate([[0], np.cumsum(rng.binomial(np.diff(sent), loss))])
    recv = sent - lost
    recv[1:-3] -= 50                          # 50 packets in flight in the delay line
    zeros = [[0] * 6] * n
    d = tmp_path / "samples"
    d.mkdir()
    topo, spec = _wan_topo(tmp_path, loss)
    for sw in topo.switch_names:
        dev = {f"{sw}-eth{p}": zeros for p in (1, 2, 3)}
        q = None
        if sw == "s1":
            dev["s1-eth3"] = [[0, int(s), 0, int(s) * 1000, 0, 0] for s in sent]
            q = {"s1-eth3": [[int(v), int(v) * 1000, 0] for v in rng.integers(0, 20, n)]}
        if sw == "s5":
            dev["s5-eth3"] = [[int(r), 0, int(r) * 1000, 0, 0, 0] for r in recv]
        _write(d / f"{sw}.jsonl", t, dev, q)
    (tmp_path / "traffic").mkdir()
    msgs = [{"dir": "tx", "qpn": 256, "peer": 1, "size": 65536, "fct_s": 0.01 * (i + 1),
             "retx_pkts": 0} for i in range(10)]
    (tmp_path / "traffic" / "h1.json").write_text(json.dumps({
        "rank": 0, "finished": True, "completion_s": 8.0, "goodput_tx_bps": 4e7,
        "start_s": 0.0, "messages": msgs, "engine": "native",
        "endpoint": {"requesters": {"256": {"retx_pkts": 3, "repair_pkts": 0}},
                     "series_columns": {"requester": ["t_s", "rate_bps"]},
                     "series": {"256": [[0.1, 4e7], [0.2, 4e7]]}}}))
    return topo, spec, d, int(lost[-1]), int(recv[-1])


def test_link_counters_are_exact_once_drained_and_never_negative(tmp_path):
    topo, _, d, true_lost, _ = _synthetic_run(tmp_path)
    dl = directed_links(topo)
    assert dl[0].name == "s1:3->s5:3" and dl[0].lag_ns >= 10_000_000
    samples = {sw: load_samples(d / f"{sw}.jsonl", sw) for sw in topo.switch_names}
    assert samples["s1"].t_ns.size == 41  # the torn line was skipped
    c = link_counters(dl, samples)
    wan = c.link_idx == 0
    lost = c.lost_packets[wan].astype(np.int64)
    assert lost[-1] == true_lost
    assert np.all(np.diff(lost) >= 0)


def test_analysis_names_the_lossy_link_and_writes_the_results_folder(tmp_path):
    topo, _, d, true_lost, true_recv = _synthetic_run(tmp_path)
    a = analyse(topo, samples_dir=d, traffic_dir=tmp_path / "traffic", hosts=("h1", "h5"),
                wire={"s1:3-s5:3": {"ab": {"lost": true_lost}}})
    s = a.summary
    ll = s["lossy_link"]
    assert ll["name"] == "s1:3->s5:3" and ll["link"] == "s1:3-s5:3"
    assert ll["directions"] == {"s1:3->s5:3": [true_lost, true_recv], "s5:3->s1:3": [0, 0]}
    assert ll["lost"] == true_lost and ll["wire_lost"] == true_lost
    assert ll["within_expected"] is True
    assert ll["ci95"][0] <= 0.01 <= ll["ci95"][1]
    assert all(r.lost == 0 for r in a.links[1:])
    assert s["bottleneck_queue"]["port"] == "s1/s1-eth3"
    assert s["fct_s"]["n"] == 10 and s["ranks"]["h5"]["finished"] is False
    res = ResultsDir(tmp_path / "out")
    plots = write_analysis(res, a, meta={"name": "t", "variant": ""})
    for name in ("queue", "rates", "fct_cdf", "loss_heatmap"):
        assert plots[name].stat().st_size > 1000
    rows = read_csv(res.file("link_loss.csv"))
    assert sum(int(r["lost"]) for r in rows if r["link"] == "s1:3->s5:3") == true_lost
    assert len(read_csv(res.file("fct.csv"))) == 10
    assert read_csv(res.file("flow_rate.csv"))[0]["rate_bps"] == "40000000.0"
    summary = json.loads(res.file("summary.json").read_text())
    assert summary["lossy_link"]["name"] == "s1:3->s5:3"
    text = "\n".join(format_summary(summary, a))
    assert "lossy link: s1:3-s5:3" in text and "within the model's range" in text
    # which data path each rank ran; h5 wrote no summary, so it reports none
    assert summary["engines"] == {"h1": "native", "h5": None}
    assert "engine: native on 1 rank (h1); unknown on 1 rank (h5)" in text


def test_results_dir_and_plots_refuse_bad_input(tmp_path):
    res = ResultsDir(tmp_path / "r")
    with pytest.raises(RunError, match="row of 1 values for 2 columns"):
        res.write_csv("x.csv", ["a", "b"], [[1]])
    (tmp_path / "f").write_text("")
    with pytest.raises(RunError, match="not a folder"):
        ResultsDir(tmp_path / "f")
    with pytest.raises(RunError, match="q1: 2 times for 1 values"):
        plot_queues({"q1": (np.array([0, 1]), np.array([3]))}, tmp_path / "q.png")
    with pytest.raises(RunError, match="finite"):
        plot_fct_cdf({"x": [float("nan")]}, tmp_path / "f.png")
    p = plot_rates({"a": (np.array([0.0, 1.0]), np.array([1e6, 2e6]))}, tmp_path / "r.png")
    assert p.stat().st_size > 1000


def test_flows_and_traffic_command_lines():
    spec = spec_from_dict({"name": "t", "topology": "two-dc", "recovery": "fec", "fec": "16,2",
                           "workload": {"kind": "allreduce", "hosts": ["h1", "h3", "h5", "h7"],
                                        "qps": 2}})
    f = flows(spec)
    assert [(x.src, x.dst) for x in f[::2]] == [(0, 1), (1, 2), (2, 3), (3, 0)]
    assert f[1].qpn == (0 << 16 | 1 << 8 | 1) and f[1].name == "h1->h3#1"
    from pathlib import Path
    argv = traffic_argv(spec, python="py", rank=2, ips=["a", "b", "c", "d"], out=Path("o.json"),
                        control=Path("c.sock"), start_at=5.0)
    assert argv[:4] == ["py", "-m", "traffic", "allreduce"]
    assert "--fec" in argv and argv[argv.index("--fec") + 1] == "16,2"
    assert argv[argv.index("--rank") + 1] == "2" and "--control" in argv
    incast = spec_from_dict({"name": "t", "topology": "two-dc",
                             "workload": {"kind": "incast", "hosts": ["h1", "h2", "h3"]}})
    assert [(x.src, x.dst) for x in flows(incast)] == [(1, 0), (2, 0)]
    assert "--cc" not in argv
    dcqcn = spec_from_dict({"name": "t", "topology": "two-dc", "cc": "dcqcn",
                            "workload": {"kind": "incast", "hosts": ["h1", "h2", "h3"]}})
    argv = traffic_argv(dcqcn, python="py", rank=1, ips=["a", "b", "c"], out=Path("o.json"),
                        control=None, start_at=5.0)
    assert argv[argv.index("--cc") + 1] == "dcqcn"


def test_variant_rows_and_control_loop_lines():
    from mininet_topos.experiment.report import control_loop_lines, format_summary
    from mininet_topos.experiment.runner import compare_row

    s = {"utilisation": 0.9,
         "switch_ports": {"s1/9": {"queue_high_water": 64, "tail_drops": 700, "tx_packets": 9},
                          "s2/1": {"queue_high_water": 3, "tail_drops": 0, "tx_packets": 9}},
         "switch_queues": {"s1/s1-eth9": {"max_pkts": 64.0, "p50_busy_pkts": 61.0,
                                          "busy_samples": 20.0}},
         "senders_cc": {"mode": "dcqcn", "cnps_rx": 40, "rate_cuts": 12, "cnps_applied": 12,
                        "min_rate_bps": 3e5}}
    row = compare_row(s)
    assert row == {"utilisation": 0.9, "switch_port": "s1/9", "queue_p50_busy_pkts": 61.0,
                   "queue_mean_busy_pkts": None, "queue_high_water_pkts": 64, "tail_drops": 700, "cnps_rx": 40,
                   "rate_cuts": 12, "reaction_p50_s": None, "loop_p50_s": None,
                   "loop_p99_s": None}
    assert compare_row({})["switch_port"] is None
    # the bottleneck is the limit's link, not the deepest queue: the CI run where a
    # descheduled Python switch queued 50 ACKs on the reverse direction (s2/2) while
    # the data's queue (s1/9) peaked at 49
    hpcc_sender = {"switch_ports": {
        "s1/9": {"queue_high_water": 49, "tail_drops": 0, "tx_packets": 2079},
        "s2/2": {"queue_high_water": 50, "tail_drops": 0, "tx_packets": 2141}},
        "goodput_limit": {"bottleneck": "s1:9->s2:2"}}
    assert compare_row(hpcc_sender)["switch_port"] == "s1/9"
    assert compare_row(hpcc_sender)["queue_high_water_pkts"] == 49
    # a limit set by the QP rate names no port: the worst port stands in
    qp_limited = {**hpcc_sender, "goodput_limit": {"bottleneck": "the QP rate"}}
    assert compare_row(qp_limited)["switch_port"] == "s2/2"
    coll = {"loop_telemetry_to_decision_s": {"count": 10, "p50": 0.002, "p99": 0.01,
                                             "max": 0.02},
            "loop_telemetry_to_sent_s": None,
            "loop_decision_to_applied_s": {"count": 0, "p50": 0, "p99": 0, "max": 0},
            "loop_telemetry_to_applied_s": {"count": 3, "p50": 0.004, "p99": 0.005,
                                            "max": 0.005},
            "loop_host_to_applied_s": {"count": 3, "p50": 0.006, "p99": 0.009, "max": 0.009}}
    assert control_loop_lines(coll) == [
        "control loop telemetry -> decision: p50 2.0 ms, p99 10.0 ms, max 20.0 ms (10 samples)",
        ("control loop telemetry -> applied at sender: p50 4.0 ms, p99 5.0 ms, max 5.0 ms "
         "(3 samples)"),
        ("control loop host capture -> applied at sender (end to end): p50 6.0 ms, p99 9.0 ms, "
         "max 9.0 ms (3 samples)")]
    # the sweep line's loop column: the end-to-end figures of cc: hpcc
    hpcc_row = compare_row({**s, "int": {"collector": coll}})
    assert (hpcc_row["loop_p50_s"], hpcc_row["loop_p99_s"]) == (0.006, 0.009)
    assert control_loop_lines(None) == [] and control_loop_lines({}) == []
    lines = format_summary({**s, "goodput_tx_bps_total": 3.6e6, "goodput_limit_bps": 4e6,
                            "int": {"collector": coll}})
    assert ("goodput (sum of ranks): 3.6 Mbit/s of a 4 Mbit/s limit; utilisation 90 % "
            "(all bytes / last finish)") in lines
    from mininet_topos.experiment.runner import utilisation
    ranks = {"h9": {"completion_s": 4.0, "bytes_sent": 0},
             "h1": {"completion_s": 2.0, "bytes_sent": 1_000_000},
             "h2": {"completion_s": 4.0, "bytes_sent": 1_000_000}, "h3": {"finished": False}}
    assert utilisation(ranks, 4e6) == 1.0
    assert utilisation({}, 4e6) is None and utilisation(ranks, 0.0) is None
    assert ("senders' DCQCN: 40 CNPs received, 12 rate cuts, lowest rate 0.30 Mbit/s"
            in lines)
    assert lines[-1].startswith("control loop host capture -> applied")


def test_topology_type_is_unchanged_by_overrides(tmp_path):
    topo, _ = _wan_topo(tmp_path, 0.02)
    assert isinstance(topo, Topology)
    assert topo.link("s1:3-s5:3").loss == LossModel.bernoulli(0.02)
