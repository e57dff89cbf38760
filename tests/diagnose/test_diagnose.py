"""Diagnosis engine on synthetic ring all-reduce runs over the two-DC topology: every
fault kind at several places, fault-free runs, the 1 % WAN gray loss against a slow
receiver causing the same slowdown, localisation as the evidence arrives, and the CLI
on a run directory written in the formats the controller and the ranks write."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from controller.diagnose import diagnose, load_telemetry
from controller.diagnose.synth import SynthFault, synth_ring, write_run
from controller.topology.load import load_topology

ROOT = Path(__file__).resolve().parents[2]
TOPO_FILE = ROOT / "mininet_topos" / "topofiles" / "two_dc.yaml"
TOPO = load_topology(TOPO_FILE)
RANKS = ["h1", "h3", "h5", "h7"]   # two per datacenter: the ring crosses the WAN twice

CASES = [
    ("gray_loss", "s1:3->s5:3", "link"), ("gray_loss", "s6:3->s2:3", "link"),
    ("gray_loss", "s3:3->s1:1", "link"),
    ("rate_degraded", "s3:3->s1:1", "link"), ("rate_degraded", "s2:3->s6:3", "link"),
    ("congestion", "s5:1->s7:3", "link"), ("congestion", "s1:3->s5:3", "link"),
    ("link_down", "s1:3->s5:3", "link"), ("link_down", "s8:3->s5:2", "link"),
    ("tiny_queue", "s1:3", "port"), ("tiny_queue", "s7:1", "port"),
    ("slow_receiver", "h5", "host"), ("slow_receiver", "h1", "host"),
    ("straggler", "2", "rank"), ("straggler", "0", "rank"),
]


def _on_ring(kind: str, target: str, seed: int) -> bool:
    """Whether the ring's (ECMP-chosen) paths cross the target at all."""
    ev = synth_ring(TOPO, RANKS, None, seed=seed)
    if kind in ("slow_receiver", "straggler"):
        return True
    paths = {f.path for f in ev.telemetry.flows}
    if kind == "tiny_queue":
        return any(x.startswith(target + "->") for p in paths for x in p)
    return any(target in p for p in paths)


@pytest.mark.parametrize("known_paths", [True, False], ids=["int-paths", "ecmp-unknown"])
@pytest.mark.parametrize(("kind", "target", "ctype"), CASES)
def test_each_fault_kind_is_top1(kind: str, target: str, ctype: str, known_paths: bool) -> None:
    seed = next(s for s in range(1, 60) if _on_ring(kind, target, s))
    fault = SynthFault(kind=kind, target=target, onset=0.6)
    d = diagnose(synth_ring(TOPO, RANKS, fault, seed=seed, known_paths=known_paths))
    assert d.culprits, f"{kind} at {target}: no culprit"
    top = d.culprits[0]
    assert (top.type, top.component, top.kind) == (ctype, target, kind), [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]
    assert top.onset is not None and abs(top.onset - (1.7e9 + 0.6)) < 0.5
    assert top.evidence


@pytest.mark.parametrize("seed", range(1, 11))
def test_no_fault_means_no_culprit(seed: int) -> None:
    d = diagnose(synth_ring(TOPO, RANKS, None, seed=seed, noise=0.15))
    assert not d.fault and d.culprits == [] and d.transfers > 0


def test_wan_gray_loss_and_slow_receiver_with_the_same_slowdown_are_told_apart() -> None:
    seed = next(s for s in range(1, 60) if _on_ring("gray_loss", "s1:3->s5:3", s))
    loss = synth_ring(TOPO, RANKS, SynthFault(kind="gray_loss", target="s1:3->s5:3",
                                              onset=0.6, loss=0.01), seed=seed,
                      step_bytes=512 << 10)
    d_loss = diagnose(loss)
    (pair,) = d_loss.slow_pairs
    dst_host = RANKS[pair[1]]

    def extra(ev: object, ps: tuple[int, int]) -> float:
        rs = [r for r in ev.records  # type: ignore[attr-defined]
              if r.dir == "send" and (r.rank, r.peer) == ps and r.end is not None]
        before = [r.end - r.start for r in rs if r.start < 1.7e9 + 0.6]
        after = [r.end - r.start for r in rs if r.start >= 1.7e9 + 0.6]
        return float(np.mean(after) - np.mean(before))
    slow_by = extra(loss, pair)
    slow = synth_ring(TOPO, RANKS, SynthFault(kind="slow_receiver", target=dst_host,
                                              onset=0.6, delay_s=slow_by), seed=seed,
                      step_bytes=512 << 10)
    assert extra(slow, pair) == pytest.approx(slow_by, rel=0.3)   # the same slowdown
    d_slow = diagnose(slow)
    assert pair in d_slow.slow_pairs                               # the same transfers slow
    assert (d_loss.culprits[0].key, d_loss.culprits[0].kind) == ("link s1:3->s5:3", "gray_loss")
    assert (d_slow.culprits[0].key, d_slow.culprits[0].kind) == (f"host {dst_host}",
                                                                 "slow_receiver")
    assert d_loss.culprits[0].evidence["loss_rate"] == pytest.approx(0.01, abs=0.006)
    assert d_slow.culprits[0].evidence["network_evidence_on_paths"] == 0.0


@pytest.mark.parametrize(("kind", "target"), [("gray_loss", "s1:3->s5:3"),
                                               ("slow_receiver", "h5"), ("straggler", "1")])
def test_localised_within_seconds_of_onset(kind: str, target: str) -> None:
    seed = next(s for s in range(1, 60) if _on_ring(kind, target, s))
    ev = synth_ring(TOPO, RANKS, SynthFault(kind=kind, target=target, onset=0.6), seed=seed)
    onset = 1.7e9 + 0.6
    first = None
    for dt in np.arange(0.1, 3.0, 0.1):
        d = diagnose(ev.until(onset + dt))
        if d.culprits and d.culprits[0].component == target:
            first = dt
            break
    assert first is not None and first <= 2.0
    assert not diagnose(ev.until(onset - 0.05)).fault   # nothing before the onset


def test_cli_on_a_run_directory(tmp_path: Path) -> None:
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="tiny_queue", target="s1:3", onset=0.6), seed=1)
    out = write_run(ev, tmp_path / "run", TOPO_FILE)
    (out / "summary.json").write_text(json.dumps({"trials": 1}))
    tel = load_telemetry(out, TOPO)
    assert set(tel.link_loss) == set(ev.telemetry.link_loss)
    assert {f.path for f in tel.flows} == {f.path for f in ev.telemetry.flows}
    assert tel.port_drops == {k: [(pytest.approx(t), n) for t, n in v]
                              for k, v in ev.telemetry.port_drops.items()}
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(out)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    first = r.stdout.splitlines()[2].split()
    assert first[:4] == ["1", "port", "s1:3", "tiny_queue"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["trials"] == 1   # other keys are kept
    top = summary["diagnosis"]["culprits"][0]
    assert (top["type"], top["component"], top["kind"]) == ("port", "s1:3", "tiny_queue")
    assert (out / "diagnosis.png").stat().st_size > 10_000


def test_cli_says_what_is_missing(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "topology.yaml" in r.stderr
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path),
                        "--topology", str(TOPO_FILE)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "no collective records" in r.stderr
    (tmp_path / "collectives").mkdir()
    (tmp_path / "collectives" / "rank0.jsonl").write_text('{"rank": 0}\n')
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path),
                        "--topology", str(TOPO_FILE)],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 2 and "rank0.jsonl:1: missing field 'comm'" in r.stderr


def test_nccl_logs_name_the_rank_that_stopped_issuing(tmp_path: Path) -> None:
    """From library logs alone (no transfers, no telemetry): the rank that issues its
    operations late is the straggler."""
    lines = []
    for rank in range(4):
        lines.append(f"n{rank}:1:1 [0] NCCL INFO comm 0x{rank}0 rank {rank} nranks 4 cudaDev 0 "
                     "busId 1 - Init COMPLETE")
        for op in range(6):
            t = 1767225600.0 + op * 0.2 + (0.3 if rank == 3 and op >= 2 else 0.0)
            stamp = f"{t:.3f}"
            lines.append(f"[{stamp}] n{rank}:1:1 [0] NCCL INFO AllReduce: opCount {op:x} "
                         f"sendbuff 0x1 recvbuff 0x1 count 1024 datatype 7 op 0 root 0 "
                         f"comm 0x{rank}0 [nranks=4] stream 0x2")
    f = tmp_path / "nccl.log"
    f.write_text("\n".join(lines) + "\n")
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path),
                        "--topology", str(TOPO_FILE), "--nccl", str(f), "--json", "--no-plot"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60, check=False)
    assert r.returncode == 0, r.stderr
    top = json.loads(r.stdout)["culprits"][0]
    assert (top["type"], top["component"], top["kind"]) == ("rank", "3", "straggler")


def test_cli_watch_prints_each_change_of_verdict(tmp_path: Path) -> None:
    ev = synth_ring(TOPO, RANKS, SynthFault(kind="straggler", target="2", onset=0.6), seed=1)
    out = write_run(ev, tmp_path / "run", TOPO_FILE)
    r = subprocess.run([sys.executable, "-m", "controller", "diagnose", "--out", str(out),
                        "--watch", "0.1", "--rounds", "3"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("diagnosis at") == 1          # printed once: it did not change
    assert "rank 2" in r.stdout and "straggler" in r.stdout
    assert json.loads((out / "summary.json").read_text())["diagnosis"]["fault"] is True


# A slow receiver on P4 switches: its own sends slowed most (the ACKs it processes
# late make its sender time out), the pair into it less, below the slow flag.  The host
# whose both pairs slowed is named, not the far end of the one flagged pair.
SLOW_RX_CASES = [  # host, delay of the transfers into it, of its own sends
    ("h1", 0.03, 0.3), ("h5", 0.03, 0.3), ("h3", 0.05, 0.2),
    ("h5", 0.3, 0.03), ("h7", 0.2, 0.1),
]


@pytest.mark.parametrize(("host", "into_s", "out_s"), SLOW_RX_CASES)
@pytest.mark.parametrize("seed", [1, 2])
def test_slow_receiver_is_the_host_both_of_whose_pairs_slowed(
        host: str, into_s: float, out_s: float, seed: int) -> None:
    fault = SynthFault(kind="slow_receiver", target=host, onset=0.6, delay_s=into_s,
                       ack_delay_s=out_s)
    d = diagnose(synth_ring(TOPO, RANKS, fault, seed=seed))
    assert d.culprits and (d.culprits[0].type, d.culprits[0].component) == ("host", host), [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]


# Loss of a few per mille on one link, too little to slow a transfer: INT switches
# count each link's loss exactly (sequence numbers), so it is a gray loss there; from
# interface counters across user-space delay lines it is within their own noise.
@pytest.mark.parametrize(("loss", "int_paths", "expect"), [
    (0.003, True, ("link", "s1:3->s5:3", "gray_loss")),
    (0.004, True, ("link", "s1:3->s5:3", "gray_loss")),
    (0.003, False, None), (0.004, False, None),
])
def test_small_loss_counts_where_int_measures_it(loss: float, int_paths: bool,
                                                 expect: tuple[str, str, str] | None) -> None:
    fault = SynthFault(kind="gray_loss", target="s1:3->s5:3", onset=0.6, loss=loss)
    ev = synth_ring(TOPO, RANKS, fault, seed=1, known_paths=int_paths, iterations=30)
    assert sum(s.lost for s in ev.telemetry.link_loss["s1:3->s5:3"]) >= 40
    d = diagnose(ev)
    got = (d.culprits[0].type, d.culprits[0].component, d.culprits[0].kind) \
        if d.culprits else None
    assert got == expect, [(c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]


def _queue_at(ev: object, port: tuple[str, int], since: float, *, until: float = 1e12,
              tx_share: float = 0.05) -> None:
    """Make ``port`` hold a 40-packet queue sending at ``tx_share`` of its line rate
    between ``since`` and ``until`` (in place, on a synthetic run's telemetry)."""
    tel = ev.telemetry  # type: ignore[attr-defined]
    tel.ports[port] = [replace(s, qlen_pkts=40, tx_rate_bps=tx_share * s.line_rate_bps)
                       if since <= s.t < until else s for s in tel.ports[port]]


H5 = next(h for h in TOPO.hosts if h.name == "h5")
INTO_H5 = f"{H5.switch}:{H5.port}->h5:0"


@pytest.mark.parametrize(("fault", "queue_into_h5", "expect"), [
    # a slow receiver backs up the port into it (P4 switches' INT shows it) and its
    # own sends slow too: the host is first, the queue its symptom
    (SynthFault(kind="slow_receiver", target="h5", onset=0.6), True, ("host", "h5")),
    # a slow access link slows only the data into the host: the link is first
    (SynthFault(kind="rate_degraded", target=INTO_H5, onset=0.6), False, ("link", INTO_H5)),
])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_queue_into_a_host_is_its_own_when_its_sends_slowed_too(
        fault: SynthFault, queue_into_h5: bool, expect: tuple[str, str], seed: int) -> None:
    ev = synth_ring(TOPO, RANKS, fault, seed=seed)
    if queue_into_h5:
        _queue_at(ev, (H5.switch, H5.port), 1.7e9 + 0.6)
    d = diagnose(ev)
    assert d.culprits and (d.culprits[0].type, d.culprits[0].component) == expect, [
        (c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]]


def _ports_of(ev: object, sw: str) -> list[tuple[str, int]]:
    return sorted(k for k in ev.telemetry.ports if k[0] == sw)  # type: ignore[attr-defined]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_stalled_switch_is_no_slow_link(seed: int) -> None:
    """Every port of one switch queues at once, sending at 5 % of its rate, for 1.5 s
    (a software switch's process not scheduled): no link is called degraded.  The same
    queue at one port alone is a degraded link.  Each switch the ring crosses twice."""
    switches = sorted({k[0] for k in synth_ring(TOPO, RANKS, None, seed=seed).telemetry.ports})
    for switch in switches:
        ev = synth_ring(TOPO, RANKS, None, seed=seed)
        ports = _ports_of(ev, switch)
        if len(ports) < 2:
            continue
        for port in ports:
            _queue_at(ev, port, 1.7e9 + 0.8, until=1.7e9 + 2.3)
        d = diagnose(ev)
        assert not [c for c in d.culprits if c.kind in ("rate_degraded", "congestion")], (
            switch, [(c.key, c.kind, round(c.confidence, 2)) for c in d.culprits[:3]])
        one = synth_ring(TOPO, RANKS, None, seed=seed)
        _queue_at(one, ports[0], 1.7e9 + 0.8)
        d1 = diagnose(one)
        assert d1.culprits and d1.culprits[0].kind == "rate_degraded", (
            switch, [(c.key, c.kind, round(c.confidence, 2)) for c in d1.culprits[:3]])
