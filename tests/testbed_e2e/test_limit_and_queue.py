"""The figures the demo prints against: the path's real bottleneck, one deepest queue."""
from __future__ import annotations

import dataclasses

from mininet_topos.experiment import apply_overrides, load_spec, preset_path
from mininet_topos.experiment.runner import deepest_queue, goodput_limit
from mininet_topos.topologies import resolve_topology


def _demo():
    (s,) = load_spec(preset_path("demo"))
    return s, apply_overrides(resolve_topology(s.topology), s)


def test_the_demo_limit_is_the_shaped_wan_link_not_the_sum_of_qp_rates() -> None:
    s, topo = _demo()
    lim = goodput_limit(s, topo)
    # two ring flows cross a 20 Mbit/s WAN direction each; the ring goes in lock-step
    assert lim["bps"] == 4 * 20e6
    assert lim["bottleneck"] in ("s1:3->s5:3", "s5:3->s1:3", "s2:3->s6:3", "s6:3->s2:3")
    # on the Python target's rates (8 Mbit/s QPs, hpcc-sender cannot exceed them) the
    # QPs' own rates bind
    slow = dataclasses.replace(s, workload=dataclasses.replace(s.workload, rate="8M"))
    assert goodput_limit(slow, topo)["bps"] == 4 * 8e6
    # HPCC in the controller raises rates to the line rate: the links bind
    ctl = dataclasses.replace(slow, cc="hpcc")
    assert goodput_limit(ctl, topo)["bps"] == 4 * 20e6


def test_one_deepest_queue_with_where_and_how() -> None:
    s, topo = _demo()
    summary = {"switch_ports": {"s5/3": {"queue_high_water": 64, "tail_drops": 30,
                                         "tx_packets": 1},
                                "s3/1": {"queue_high_water": 3, "tail_drops": 0,
                                         "tx_packets": 1}},
               "ranks": {"h1": {"tx_pkts": 600}, "h3": {"tx_pkts": 400}}}
    dq = deepest_queue(summary, topo, s.sample_interval_s)
    assert dq["max_pkts"] == 64 and dq["link"] == "s5:3->s1:3"
    assert "high-water" in dq["measured"] and dq["tail_drops"] == 30
    assert dq["tail_drop_pct"] == 3.0
    routers = deepest_queue({"bottleneck_queue": {"port": "s1/s1-eth3", "max_pkts": 9},
                             "queue_drops": {"s1/s1-eth3": 2}}, topo, 0.2)
    assert routers["max_pkts"] == 9 and "sampled every 0.2 s" in routers["measured"]


def test_the_data_check_fails_on_a_wrong_or_missing_verdict() -> None:
    from mininet_topos.experiment.analysis import data_check
    from mininet_topos.experiment.report import data_check_line

    ok = data_check({"h1": {"result_ok": True}, "h3": {"result_ok": True}})
    assert ok["ok"] and "passed on all 2 ranks" in data_check_line(
        {"data_check": ok, "workload": "allreduce"})
    wrong = data_check({"h1": {"result_ok": False}, "h3": {"result_ok": None}})
    line = data_check_line({"data_check": wrong, "workload": "allreduce"})
    assert not wrong["ok"] and "WRONG on h1" in line and "no verdict from h3" in line
    assert not data_check({})["ok"]
