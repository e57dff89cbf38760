"""The harness on P4 switches: faults go on the links the rank pairs' INT paths cross,
the controller's exports become the diagnosis's telemetry (from a given time on), and
culprits say how many of their pairs' paths INT recorded (synthetic runs written in
the controller's formats; no Mininet)."""
from __future__ import annotations

from pathlib import Path

import pytest

from controller.diagnose import diagnose
from controller.diagnose.evidence import Evidence
from controller.diagnose.synth import SynthFault, synth_ring, write_run
from controller.topology.model import LinkRole
from mininet_topos.faults.harness import HarnessConfig, _where, run_harness
from mininet_topos.faults.p4 import (
    P4_KINDS,
    PortDropPoller,
    controller_telemetry,
    int_crossings,
    int_places,
)
from mininet_topos.faults.spec import FaultError, FaultSpec
from mininet_topos.topologies import resolve_topology
from softswitch.switchd.errors import SwitchdError

TOPO = resolve_topology("two-dc")
RING = ("h1", "h3", "h5", "h7")
TOPO_FILE = Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles" / "two_dc.yaml"


def test_places_are_the_int_paths_links() -> None:
    ev = synth_ring(TOPO, list(RING), None, seed=3, known_paths=True)
    places = int_places(TOPO, ev.telemetry, RING)
    assert set(places) == set(P4_KINDS["ebpf"]) >= set(P4_KINDS["softswitch"])
    on_int = {link for f in ev.telemetry.flows for link in f.path}
    roles = {f"{n}->{m}": ln.role for ln in TOPO.links
             for n, m in ((ln.a, ln.b), (ln.b, ln.a))}
    assert set(places["link_down"]) == {x for x in on_int if roles[x] != LinkRole.HOST}
    assert set(places["gray_loss"]) == {x for x in on_int if roles[x] == LinkRole.WAN}
    assert places["gray_loss"], "the ring crosses the WAN"
    assert places["slow_receiver"] == list(RING)
    assert places["rate_degraded"] == places["congestion"] == places["link_down"]
    # a tiny queue at each pair's first switch egress (the sender's bursts arrive there)
    ip = {h.name: h.ipv4 for h in TOPO.hosts}
    firsts = {f.path[1].split("->")[0] for f in ev.telemetry.flows
              if f.src in (ip[h] for h in RING) and len(f.path) >= 2}
    assert places["tiny_queue"] and set(places["tiny_queue"]) <= firsts
    for port in places["tiny_queue"]:
        sw, _, n = port.partition(":")
        assert sw in TOPO.switch_names and TOPO.link_at(sw, int(n)).role != LinkRole.HOST
    crossed = int_crossings(TOPO, ev.telemetry, RING)
    for link in places["link_down"]:
        assert crossed[link]
        f = FaultSpec(kind="link_down", target=link, onset_s=3, duration_s=9)
        assert _where(f, TOPO, ev.telemetry, RING, True) == {
            "crossed_by": crossed[link], "paths_from": "int"}


def test_no_int_no_place() -> None:
    ev = synth_ring(TOPO, list(RING), None, seed=3, known_paths=False)
    places = int_places(TOPO, ev.telemetry, RING)
    assert places["gray_loss"] == places["link_down"] == places["slow_receiver"] == []
    assert places["tiny_queue"] == places["rate_degraded"] == []


class _StatsSwitch:
    """A switch whose statistics say ``tail_drops`` (what ``SoftSwitch.stats`` reads)."""

    def __init__(self, name: str) -> None:
        self.name, self.tail_drops, self.broken = name, 0, False

    def stats(self) -> dict:
        if self.broken:
            raise SwitchdError("statistics file s3.stats.json: not JSON")
        return {"ports": [{"port": 3, "tail_drops": self.tail_drops,
                           "rx_socket_drops": 2 * self.tail_drops}, {"port": 1}]}


def test_port_drop_poller_reads_the_switches_drops_over_time() -> None:
    sw = _StatsSwitch("s3")
    poller = PortDropPoller([sw], interval_s=0.0)
    for n in (0, 4, 9):
        sw.tail_drops = n
        poller.poll()
    sw.broken = True
    poller.poll()   # a file caught mid-rewrite is skipped, not fatal
    got = poller.drops[("s3", 3)]
    assert [n for _t, n in got] == [0, 4, 9]
    assert [n for _t, n in poller.drops[("s3", 1)]] == [0, 0, 0]
    assert poller.since(got[1][0])[("s3", 3)] == got[1:]
    # the Python target's receive-socket drops too (a port without them: none recorded)
    assert [n for _t, n in poller.rx_drops[("s3", 3)]] == [0, 8, 18]
    assert ("s3", 1) not in poller.rx_drops


def test_port_drop_poller_reads_the_hosts_udp_receive_buffer_drops() -> None:
    import os
    poller = PortDropPoller([], interval_s=0.0, hosts={"h1": os.getpid(), "gone": 2 ** 22 + 7})
    poller.poll()
    poller.poll()
    assert len(poller.host_drops["h1"]) == 2 and poller.host_drops["h1"][0][1] >= 0
    assert "gone" not in poller.host_drops   # a namespace that went away: skipped


def test_controller_exports_become_telemetry_from_a_time_on(tmp_path: Path) -> None:
    fault = SynthFault(kind="gray_loss", target="s1:3->s5:3", onset=0.6)
    seed = next(s for s in range(1, 60) if any(
        "s1:3->s5:3" in f.path for f in synth_ring(TOPO, list(RING), None, seed=s)
        .telemetry.flows))
    ev = synth_ring(TOPO, list(RING), fault, seed=seed, known_paths=True)
    write_run(ev, tmp_path, TOPO_FILE)
    t_all = controller_telemetry(TOPO, tmp_path, since_unix=0)
    assert t_all.flows and t_all.link_loss
    cut = 1.7e9 + 1.0
    late = controller_telemetry(TOPO, tmp_path, since_unix=cut)
    assert late.flows and all(f.t >= cut for f in late.flows)
    assert all(s.t >= cut for v in late.link_loss.values() for s in v)
    d = diagnose(Evidence(topo=TOPO, records=ev.records, telemetry=t_all))
    top = d.culprits[0]
    assert (top.component, top.kind) == ("s1:3->s5:3", "gray_loss")
    assert top.evidence["int_paths_on_it"] == top.evidence["pairs_on_it"] >= 1


def test_a_switch_the_harness_cannot_inject_on_is_refused_before_any_network(tmp_path: Path) -> None:
    with pytest.raises(FaultError, match="bmv2"):
        run_harness(HarnessConfig(out=tmp_path, switch="bmv2"), log=lambda *_: None)
