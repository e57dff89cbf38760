"""HPCC's base RTT T comes from the flow's path in the topology.

Regression: the running controller used one fixed T of 20 µs for every flow. On the
100 Mbit/s test beds one frame alone takes ~90-120 µs to serialise, so B*T (250 B)
was smaller than one packet: a single queued packet read as u > 4 and the demo's
flows sat at the minimum rate (0.1 % of line rate) with near-idle links.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from controller.cc import HpccEngine, HpccParams
from controller.cc.telemetry import V1MODEL_TS_MODULUS_NS, HopSamples
from controller.int.records import REPORT_DTYPE
from controller.runner.app import Controller
from controller.runner.config import RunConfig
from controller.runner.rtt import flow_base_rtt_s, path_base_rtt_s
from controller.topology import dump_topology
from controller.topology.generators import two_datacenters

PKT = 1132            # RoCEv2 frame with one INT hop, as the demo's first hop sees it
LINE = 100e6


def _controller(tmp_path: Path) -> Controller:
    topo = two_datacenters()
    path = tmp_path / "two-dc.yaml"
    dump_topology(topo, path)
    ctl = Controller(cfg=RunConfig(topology=str(path), out_dir=str(tmp_path / "out")))
    ctl.topo = topo          # no switches needed: only the topology is consulted
    return ctl


def _sample(src: str, dst: str, qp: int = 256) -> np.ndarray:
    s = np.zeros(1, REPORT_DTYPE)
    s["src_ip"] = int.from_bytes(bytes(map(int, src.split("."))), "big")
    s["dst_ip"] = int.from_bytes(bytes(map(int, dst.split("."))), "big")
    s["dest_qp"] = qp
    return s[0]


def test_path_rtt_of_two_datacenters() -> None:
    topo = two_datacenters()
    # h1 -> s3 -> s1 -> s4 -> h3: two host links (1500 B) and two fabric links (2000 B)
    # at 100 Mbit/s, no delay, there and back
    intra = 2 * (2 * 1500 * 8 / 100e6 + 2 * 2000 * 8 / 100e6)
    assert path_base_rtt_s(topo, "h1", "h3") == pytest.approx(intra)
    # across the WAN: one more fabric hop and 10 ms each way
    cross = 2 * (2 * 1500 * 8 / 100e6 + 3 * 2000 * 8 / 100e6 + 10e-3)
    assert path_base_rtt_s(topo, "h1", "h7") == pytest.approx(cross)
    # the configured value is a floor; unknown destinations get the sender's link
    assert flow_base_rtt_s(topo, "h1", "10.2.2.1", floor_s=1.0) == 1.0
    assert flow_base_rtt_s(topo, "h1", "192.0.2.9", floor_s=0.0) == pytest.approx(
        2 * 1500 * 8 / 100e6)


def test_resolve_gives_each_flow_its_path_rtt(tmp_path: Path) -> None:
    ctl = _controller(tmp_path)
    t_intra = ctl._resolve(_sample("10.1.1.1", "10.1.2.1"))
    t_cross = ctl._resolve(_sample("10.1.1.1", "10.2.2.1"))
    assert t_intra is not None and t_cross is not None
    assert t_intra.base_rtt_s == pytest.approx(path_base_rtt_s(ctl.topo, "h1", "h3"))
    assert t_cross.base_rtt_s == pytest.approx(path_base_rtt_s(ctl.topo, "h1", "h7"))
    assert t_intra.max_rate_bps == LINE


def test_max_rate_caps_the_host_links_rate(tmp_path: Path) -> None:
    """--max-rate: senders whose line rate is below their host link's (the two-dc P4
    e2e test's 5 Mbit/s on Python softswitches) start and stay under it; raised to the
    link's 100 Mbit/s they overran the switches, whose receive sockets queued seconds
    and the senders' timers resent 8-10 x the data (3 runs of 8)."""
    topo = two_datacenters()
    path = tmp_path / "two-dc.yaml"
    dump_topology(topo, path)
    ctl = Controller(cfg=RunConfig(topology=str(path), out_dir=str(tmp_path / "out"),
                                   max_rate_bps=5e6))
    ctl.topo = topo
    t = ctl._resolve(_sample("10.1.1.1", "10.2.2.1"))
    assert t is not None and t.max_rate_bps == 5e6
    above = Controller(cfg=RunConfig(topology=str(path), out_dir=str(tmp_path / "out2"),
                                     max_rate_bps=1e9))
    above.topo = topo
    t = above._resolve(_sample("10.1.1.1", "10.2.2.1"))
    assert t is not None and t.max_rate_bps == LINE   # the link's rate still bounds it
    from controller.runner.errors import RunError
    with pytest.raises(RunError, match="--max-rate"):
        RunConfig(topology=str(path), out_dir=str(tmp_path / "o3"), max_rate_bps=0.0)


def test_cli_takes_the_senders_rate_syntax(capsys) -> None:
    from controller.cli import build_parser
    p = build_parser()
    assert p.parse_args(["run", "--topology", "t.yaml", "--max-rate", "2.5G"]).max_rate == 2.5e9
    assert p.parse_args(["run", "--topology", "t.yaml"]).max_rate is None
    with pytest.raises(SystemExit) as exc:
        p.parse_args(["run", "--topology", "t.yaml", "--max-rate", "fast"])
    assert exc.value.code == 2 and "expected e.g. 100M" in capsys.readouterr().err


def _demo_like_batches(n_batches: int = 40, per_batch: int = 50) -> list[HopSamples]:
    """One flow on s3>s1>s4 sending 80 % of line rate, a standing one-packet queue at
    the middle hop, telemetry batched by the host agent (one arrival per batch), as
    recorded in the two-DC demo. Timestamps in µs scaled to ns like the feed."""
    gap_us = PKT * 8 / (0.8 * LINE) * 1e6
    out = []
    k = 0
    for b in range(n_batches):
        i = np.arange(k, k + per_batch)
        k += per_batch
        ts = (np.floor(1000 + i * gap_us).astype(np.uint64) * np.uint64(1000))[:, None] \
            + np.zeros((1, 3), np.uint64)
        tx = (i.astype(np.uint64) * np.uint64(PKT))[:, None] + np.zeros((1, 3), np.uint64)
        q = np.zeros((per_batch, 3))
        q[:, 1] = PKT
        out.append(HopSamples(
            flow_idx=np.zeros(per_batch, np.int64), n_hops=np.full(per_batch, 3),
            arrival_ns=np.full(per_batch, (b + 1) * 20_000_000),
            node_id=np.tile(np.array([3, 1, 4], np.uint32), (per_batch, 1)),
            ts_ns=ts, qlen_bytes=q, tx_bytes=tx, line_rate_bps=np.full((per_batch, 3), LINE)))
    return out


def test_one_packet_queue_at_100mbps_keeps_rate_near_line_rate(tmp_path: Path) -> None:
    """Fails with a fixed 20 µs T (rate falls to ~0.1 Mbit/s); with the path RTT
    the flow stays near line rate: U = 0.8 + 1132 B / (B T) < eta."""
    ctl = _controller(tmp_path)
    target = ctl._resolve(_sample("10.1.1.1", "10.1.2.1"))
    assert target is not None
    eng = HpccEngine(n_flows=4, params=HpccParams(base_rtt_s=ctl.cfg.base_rtt_s,
                                                  ts_modulus_ns=V1MODEL_TS_MODULUS_NS),
                     clock_ns=lambda: 0)
    eng.start_flows([0], max_rate_bps=target.max_rate_bps, base_rtt_s=target.base_rtt_s)
    rates = []
    for batch in _demo_like_batches():
        d = eng.update(batch)
        rates.append(d.rate_bps[-1])
    assert min(rates) > 0.5 * LINE, f"HPCC rate fell to {min(rates) / 1e6:.2f} Mbit/s"
    assert rates[-1] > 0.9 * LINE
