"""HPCC at the sender with real packets: two senders into one receiver through a
softswitch running p4/int_rocev2.p4 (INT on data to the receiver, host-mode sink, a
4 Mbit/s bottleneck port with a 64-packet queue); the receiver's eBPF sink strips INT
and echoes the hop records in its ACKs; ``--cc hpcc-sender`` senders cut their rates
within a few round trips of the queue building and climb back once it drains (here:
when the smaller sender finishes).  Prefix "hs"."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from netns_util import ROOT, port_stats, run_ranks, softswitch_star

from common.kernel.netns import Namespace
from ebpf.sink import IntSink, SinkConfig

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow]

PROGRAM = Path(ROOT) / "p4" / "int_rocev2.p4"
SUBNET = "10.81.0"
BOTTLENECK_MBPS = 4
QUEUE_PKTS = 64
SWITCH_MAC = 0x02AA00000001


def _mac(m: str) -> int:
    return int(m.replace(":", ""), 16)


def _entries(hosts: list[Namespace]) -> str:
    rx_ip = f"0x0a51{0:02x}01"
    lines = ["setdefault SwitchEgress.switch_config set_switch_config(node_id:7)",
             (f"add SwitchEgress.port_line_rate port:1 set_line_rate(line_rate_mbps:"
             f"{BOTTLENECK_MBPS})"),
             "add SwitchIngress.int_sink egress_port:1 sink_host()",
             # INT on RoCEv2 to the receiver only (its ACKs go back without)
             (f"add SwitchIngress.int_watchlist 10 src_addr:0x******** dst_addr:{rx_ip} "
             "src_port:0x**** dst_port:0x12b7 dscp:0b****** int_source("
             "instruction_bitmap:0xd400, ds_instruction:0xe000, max_hops:8)")]
    for i, h in enumerate(hosts):
        lines.append(f"add SwitchIngress.ipv4_lpm dst_addr:0x0a5100{i + 1:02x}/32 "
                     f"ipv4_forward(port:{i + 1}, src_mac:{SWITCH_MAC:#014x}, "
                     f"dst_mac:{_mac(h.mac):#014x})")
    return "\n".join(lines) + "\n"


def int_star(n: int, tmp: Path) -> contextlib.AbstractContextManager[
        tuple[list[Namespace], Path]]:
    """``n`` hosts on one int_rocev2 softswitch; port 1 (host 0, the receiver) is the
    paced bottleneck and a host-mode INT sink.  Yields the hosts and the stats file."""
    return softswitch_star(n, tmp, prefix="hs", subnet=SUBNET, program=PROGRAM,
                           entries=_entries, neigh_mac="02:aa:00:00:00:01",
                           queue_rate_mbps=BOTTLENECK_MBPS, queue_depth_pkts=QUEUE_PKTS,
                           ready_timeout_s=90)


def _incast(tmp: Path, cc: str) -> tuple[list[dict], dict]:
    out = tmp / cc
    out.mkdir()
    with int_star(3, out) as (hosts, stats):
        with IntSink(hosts[0].ifname, netns=hosts[0].name, config=SinkConfig(echo=True)):
            # two senders at 8 Mbit/s each into the 4 Mbit/s port: 4x overload until
            # rank 2 (16 KiB messages) is done; rank 1 (64 KiB) then has the port alone.
            # (2x was not enough on a loaded machine: late senders never filled the queue)
            outs = run_ranks(hosts, "incast", ["-s", "64K", "-c", "6", "--rate", "8M",
                                               "--cc", cc, "--window", "128"], out,
                             per_rank={2: ["-s", "16K"]}, timeout=90)
        port = port_stats(stats, 1)
    return outs, port


def _rates(o: dict) -> list[tuple[float, float]]:
    (series,) = [s for q, s in o["endpoint"]["series"].items()
                 if q in o["endpoint"]["requesters"]]
    return [(row[0], row[1]) for row in series]


def test_hpcc_sender_cuts_within_round_trips_and_recovers(tmp_path):
    none, port_none = _incast(tmp_path, "none")
    hpcc, port_hpcc = _incast(tmp_path, "hpcc-sender")
    for outs in (none, hpcc):
        assert all(o["finished"] for o in outs)
        rx = outs[0]["endpoint"]["responders"]
        assert sum(r["msgs_done"] for r in rx.values()) == 12
    assert port_none["tail_drops"] > 0, port_none
    for o in hpcc[1:]:
        cc = o["cc"]
        assert cc["mode"] == "hpcc-sender" and cc["echo_acks"] > 0, cc
        assert cc["rate_cuts"] > 0 and cc["min_rate_bps"] < 0.75 * 4e6, cc
        (hp,) = cc["hpcc"].values()
        # the reaction: first echoed queue above zero -> first cut, a few round trips
        assert hp["reaction_s"] is not None and hp["base_rtt_s"], hp
        assert hp["reaction_s"] <= 5 * hp["base_rtt_s"] + 0.05, hp
    # rank 1 climbs back towards the line rate once rank 2 is done and the queue drains
    rates = _rates(hpcc[1])
    t_min = min(rates, key=lambda x: x[1])[0]
    assert max(r for t, r in rates if t > t_min) >= 0.8 * 4e6, rates
    # and the queue overflowed much less than without congestion control
    assert port_hpcc["tail_drops"] <= port_none["tail_drops"] / 4, (port_hpcc, port_none)
