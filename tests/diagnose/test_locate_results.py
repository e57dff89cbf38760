"""`controller diagnose --out DIR` finds the files of each results-folder layout."""
from __future__ import annotations

from pathlib import Path

from controller.cli.diagnose import locate


def test_layouts(tmp_path: Path) -> None:
    ctl = tmp_path / "ctl"                     # controller run --out DIR
    ctl.mkdir()
    assert locate(ctl) == (ctl, ctl / "topology.yaml", ctl / "collectives")
    demo = tmp_path / "demo"                   # the demo's or an experiment's results
    (demo / "logs" / "controller").mkdir(parents=True)
    (demo / "logs" / "topology.yaml").write_text("name: x\n")
    assert locate(demo) == (demo / "logs" / "controller", demo / "logs" / "topology.yaml",
                            demo / "collectives")
    faults = tmp_path / "fault"                # experiment faults --out DIR
    (faults / "testbed").mkdir(parents=True)
    (faults / "testbed" / "topology.yaml").write_text("name: x\n")
    (faults / "trial000" / "collectives").mkdir(parents=True)
    tel, _, why = locate(faults)
    assert tel is None and f"--out {faults / 'trial000'}" in str(why)
    trial = faults / "trial000"
    assert locate(trial) == (trial, faults / "testbed" / "topology.yaml",
                             trial / "collectives")


def test_saved_telemetry_reads_back_as_it_was(tmp_path: Path) -> None:
    """A kernel-router trial's counters, saved in the controller's layout, are what
    `controller diagnose --out TRIAL` reads (no controller exported them)."""
    from controller.diagnose.evidence import (
        FlowSample,
        LossSample,
        PortSample,
        Telemetry,
        load_telemetry,
        save_telemetry,
    )
    from controller.topology.load import load_topology
    topo = load_topology(Path(__file__).resolve().parents[2] / "mininet_topos" / "topofiles"
                         / "two_dc.yaml")
    sw = topo.switches[0].name
    link = f"{sw}:1->{topo.switches[1].name}:1"
    tel = Telemetry(
        link_loss={link: [LossSample(t=100.25, lost=3, delivered=97),
                          LossSample(t=100.5, lost=0, delivered=100)]},
        ports={(sw, 2): [PortSample(t=100.25, qlen_pkts=7, tx_rate_bps=3.5e6,
                                    line_rate_bps=1e7),
                         PortSample(t=100.5, qlen_pkts=0, tx_rate_bps=None,
                                    line_rate_bps=None)]},
        port_drops={(sw, 2): [(100.25, 0), (100.5, 4)],
                    (sw, 3): [(100.5, 1)]})
    # a P4 trial's flows with their INT paths (the access link in, then each egress)
    h1, h3 = topo.host("h1"), topo.host("h3")
    from controller.topology.routing import paths
    path = tuple(str(x) for x in paths(topo, "h1", "h3")[0])
    tel.flows = [FlowSample(t=100.25, src=h1.ipv4, dst=h3.ipv4, qp=7, path=path, lost=2),
                 FlowSample(t=100.5, src=h1.ipv4, dst=h3.ipv4, qp=7, path=path, lost=2)]
    trial = tmp_path / "trial000"
    save_telemetry(tel, trial, topo)
    back = load_telemetry(trial, topo)
    assert back.link_loss == tel.link_loss
    assert back.ports == tel.ports
    assert back.port_drops == tel.port_drops
    assert back.flows == tel.flows
