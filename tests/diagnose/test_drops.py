"""Losses counted by the switches and hosts themselves: windows of their cumulative
counters, per path and per host, and their round trip through a trial's files."""
from __future__ import annotations

from pathlib import Path

from controller.diagnose.drops import host_drops, increase, path_drops
from controller.diagnose.evidence import Telemetry, load_telemetry, save_telemetry
from controller.topology.model import Topology
from mininet_topos.topologies import resolve_topology

TOPO: Topology = resolve_topology("two-dc")


def test_increase_is_the_growth_within_the_window() -> None:
    s = [(1.0, 5), (2.0, 5), (3.0, 9), (4.0, 12)]
    assert increase(s, 2.0, 4.0) == 7
    assert increase(s, 2.5, 3.5) == 4       # the sample by 2.5 is 2.0's
    assert increase(s, 0.0, 4.0) == 7       # nothing before: from the first sample
    assert increase(s, 4.5, 9.0) == 0
    assert increase([], 0.0, 9.0) == 0
    assert increase([(1.0, 9), (2.0, 3)], 0.5, 2.0) == 0   # a restarted counter: no loss


def test_path_drops_count_queue_and_receive_socket_drops_on_the_path_only() -> None:
    tel = Telemetry(
        port_drops={("s8", 1): [(1.0, 0), (2.0, 40)], ("s3", 1): [(1.0, 0), (2.0, 99)]},
        port_rx_drops={("s5", 1): [(1.0, 2), (2.0, 5)], ("s7", 1): [(1.0, 0), (2.0, 7)]})
    path = ("h5:0->s7:1", "s7:3->s5:1", "s5:2->s8:3", "s8:1->h7:0")
    # s7:1 receives from h5, s5:1 from s7, s8:1 sends to h7; s3 is elsewhere
    assert path_drops(tel, path, 1.0, 2.0) == 7 + 3 + 40
    assert path_drops(tel, path, 2.0, 3.0) == 0
    assert path_drops(tel, ("bogus",), 1.0, 2.0) == 0


def test_host_and_socket_drops_survive_a_trials_files(tmp_path: Path) -> None:
    tel = Telemetry(port_drops={("s8", 1): [(1.0, 0), (2.0, 40)]},
                    port_rx_drops={("s8", 1): [(1.0, 1), (2.0, 3)]},
                    host_drops={"h7": [(1.0, 10), (2.0, 25)], "h5": [(1.5, 0)]})
    save_telemetry(tel, tmp_path, TOPO)
    back = load_telemetry(tmp_path, TOPO)
    assert back.port_drops == tel.port_drops
    assert back.port_rx_drops == tel.port_rx_drops
    assert back.host_drops == tel.host_drops
    assert host_drops(back, "h7", 1.0, 2.0) == 15
    cut = back.since(1.5)
    assert cut.host_drops == {"h7": [(2.0, 25)], "h5": [(1.5, 0)]}
    assert back.until(1.5).port_rx_drops == {("s8", 1): [(1.0, 1)]}
