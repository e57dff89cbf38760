"""A recorded run for the web tests: the dumbbell topology and a state file as the
controller writes it (hops, flows, losses, the loss map, alerts)."""
from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = ROOT / "mininet_topos" / "topofiles" / "dumbbell.yaml"


def recorded_state(*, lossy: str | None = None, running: bool = False) -> dict:
    """A state as ``Controller.write_state`` writes it; ``lossy``: the directed link
    with 8 % recent loss."""
    from controller.topology import directed_links, load_topology
    topo = load_topology(str(TOPOLOGY))
    links = [d.name for d in directed_links(topo)]
    rate = [0.08 if n == lossy else 0.0 for n in links]
    lossy_link = next((d.link for d in directed_links(topo) if d.name == lossy), None)
    now = time.time()
    h1 = topo.hosts[0]
    return {
        "version": 1, "updated_unix_s": now, "pid": 1, "running": running, "topology": topo.name,
        "switches": [{"name": s.name, "state": "ready", "primary": True} for s in topo.switches],
        "flows": [{"src": h1.ipv4, "dst": topo.hosts[-1].ipv4, "sport": 49152, "qp": 17, "hops": 2,
                   "path": [s.name for s in topo.switches], "samples": 40, "last_psn": 900,
                   "rate_bps": 2.5e7, "fec": [8, 1], "lost": 3}],
        "hops": [{"node_id": s.int_node_id, "switch": s.name,
                  "egress_port": d.src_port, "qlen_bytes": 4096, "qlen_pkts": 4,
                  "tx_rate_bps": 4e7, "line_rate_bps": 1e8, "utilisation": 0.4,
                  "hop_latency_ns": 2000, "samples": 10}
                 for s in topo.switches for d in directed_links(topo) if d.src == s.name],
        "losses": [{"link": n, "lost": 80 if n == lossy else 0, "role": "fabric"} for n in links],
        "lossmap": {"links": links, "bin_s": 1.0, "start_unix_s": now - 3,
                    "rate": rate, "recent_rate": rate,
                    "ci95": [[r * 0.8, r * 1.2] for r in rate],
                    "lost": [[0, 0, 80 if n == lossy else 0] for n in links],
                    "delivered": [[1000, 1000, 920] for _ in links]},
        "collector": {"reports": 0, "host_records": 120},
        "alerts": {"rules": [{"name": "link-loss", "kind": "link_loss", "above": 0.01,
                              "for_s": 0, "clear_s": 2}],
                   "active": ([{"rule": "link-loss", "kind": "link_loss", "subject": lossy,
                                "state": "firing", "value": 0.08, "threshold": 0.01,
                                "since_unix_s": now - 1, "fired_unix_s": now - 1,
                                "resolved_unix_s": None}] if lossy else []),
                   "resolved": [], "fired_total": 1 if lossy else 0},
        # the mitigation (controller run --mitigate act) rerouted around the lossy link
        "mitigation": {"mode": "act", "avoided": [lossy_link], "fec_links": [],
                       "written_avoid": [lossy_link], "active": [], "counts": {"reroute": 1},
                       "errors": {}, "path_notices": 1,
                       "actions": [{"seq": 1, "verb": "reroute", "target": lossy_link,
                                    "avoid": [lossy_link], "kind": "gray_loss", "component": lossy,
                                    "confidence": 1.0, "onset": now - 2, "source": "lossmap",
                                    "reason": f"gray_loss on {lossy}: routes keep off {lossy_link}",
                                    "evidence": {"lost": 80, "delivered": 920, "loss_rate": 0.08},
                                    "at": now - 1, "hold_s": 10.0, "undoes": None,
                                    "outcome": "written", "write_s": 0.2}]}
        if lossy else None,
        "diagnosis": {"fault": True, "culprits": [{"type": "link", "component": lossy,
                                                   "kind": "gray_loss", "confidence": 0.93,
                                                   "onset": now - 2, "evidence": {"loss": 0.08}}]}
        if lossy else None,
    }


def results_folder(out: Path, state: dict) -> Path:
    """OUT laid out as a demo's: logs/topology.yaml and logs/controller/controller_state.json."""
    (out / "logs" / "controller").mkdir(parents=True, exist_ok=True)
    shutil.copy(TOPOLOGY, out / "logs" / "topology.yaml")
    (out / "logs" / "controller" / "controller_state.json").write_text(json.dumps(state))
    return out
