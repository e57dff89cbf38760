"""The ``rogue`` phase of an experiment: start the keyless flooder beside Mininet during
the workload, watch that nothing forged is applied and that memory stays flat, and
sum it up (``summary.json["rogue"]``).

Forged feedback applied = confirmations the rogue received (an agent confirms every
record it took to the sender's address); forged host records / reports applied = the
controller's flow or hop tables ever showing the rogue's marks (source 10.99.99.99,
node ``FORGED_NODE_ID``).  Rejections by reason come from the controller's state file
(collector: ``rejected``) and the agents' last lines (``ebpf.agent: final``).
Memory (``mininet_topos.testbed.memory``): the resident set of the controller and
every agent, sampled at each poll of the run; ``memory`` holds per process its size
when the flood starts, the peak and the end, and whether it stayed flat
(``memory_flat``: end <= start + max(16 MiB, 20 %) for every one).
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from ebpf.agent_auth import FINAL_PREFIX
from mininet_topos.testbed import NodeProcess, Testbed
from mininet_topos.testbed.memory import MemoryWatch

from .rogue import FORGED_NODE_ID, FORGED_SRC_IP
from .spec import ExperimentSpec
from .workload import Flow

__all__ = ["RoguePhase", "baseline_memory", "finish_rogue", "format_memory", "format_rogue",
           "rogue_comparison", "watched_pids"]


def watched_pids(tb: Testbed) -> dict[str, int]:
    """The controller and the agents the test bed started, by name."""
    return {p.name: p.proc.pid for p in tb.processes
            if p.name == "controller" or p.name.startswith("agent-")}


def baseline_memory(tb: Testbed, spec: ExperimentSpec, start_at: float) -> MemoryWatch | None:
    """The same memory watch in the sweep's run without the rogue (``rogue.rate: 0``),
    started when the flood would have: what the workload alone grows."""
    if spec.rogue is None or spec.rogue.rate > 0 or spec.switch == "linux-router":
        return None
    return MemoryWatch(watched_pids(tb), start_at=start_at + spec.rogue.start_s)


class RoguePhase:
    """Flooder process and what is watched while it runs."""

    def __init__(self, tb: Testbed, spec: ExperimentSpec, flows: list[Flow], start_at: float,
                 out: Path, python: str = sys.executable) -> None:
        assert spec.rogue is not None
        self.tb, self.spec, self.out = tb, spec, out
        self.memory = MemoryWatch(self._watched())
        self.forged_flows = 0
        self.forged_hops = 0
        self.proc: NodeProcess | None = None
        # niced: the rogue stands for another machine; here it shares the CPU with the
        # emulated network (user-space switches), which must not pay for its sending
        argv = ["nice", "-n", "10", python, "-m", "mininet_topos.experiment.rogue",
                "--rate", f"{spec.rogue.rate:g}",
                "--duration", f"{spec.rogue.duration_s:g}", "--out", str(out)]
        by_host: dict[str, list[int]] = {}
        for f in flows:
            by_host.setdefault(f.src_host, []).append(f.qpn)
        for h, qpns in sorted(by_host.items()):
            if h in tb.mgmt:
                _root, host_ip, fb = tb.mgmt[h]
                argv += ["--qp", f"{host_ip}:{fb}=" + ",".join(str(q) for q in qpns)]
        for h in tb.agent_hosts:
            argv += ["--agent-id", tb.topo.host(h).ipv4]
        root_ip = next(iter(tb.mgmt.values()))[0] if tb.mgmt else "127.0.0.1"
        argv += ["--collector", f"{root_ip}:{tb.ports['agent']}",
                 "--reports", f"{root_ip}:{tb.ports['report']}"]
        self.argv = argv
        self.start_at = start_at + spec.rogue.start_s
        self.end_at = self.start_at + spec.rogue.duration_s

    def _watched(self) -> dict[str, int]:
        return watched_pids(self.tb)

    def poll(self, state: Any) -> None:
        """Start the flood when due; look for forged marks in the controller's tables."""
        if self.proc is None and time.time() >= self.start_at:
            self.memory.mark_start()
            self.proc = self.tb.spawn("rogue", None, self.argv)
        else:
            self.memory.sample()
        self.forged_flows += sum(1 for f in state.flows if f.get("src") == FORGED_SRC_IP)
        self.forged_hops += sum(1 for h in state.hops if h.get("node_id") == FORGED_NODE_ID)

    def finish(self, state: Any) -> dict[str, Any]:
        """Wait for the flooder and for the controller's next state file (``state``: the
        runner's poller), then everything but the agents' counters (``agents``)."""
        if self.proc is not None:
            deadline = time.time() + max(0.0, self.end_at - time.time()) + 30
            while self.proc.proc.poll() is None and time.time() < deadline:
                self.memory.sample()
                time.sleep(0.2)
            time.sleep(1.5)   # the controller drains its sockets and rewrites its state
        state.poll(force=True)
        self.poll(state)
        collector: dict[str, Any] = state.collector
        memory = self.memory.summary()
        try:
            sent = json.loads(self.out.read_text())
        except (OSError, ValueError):
            sent = {"sent": {}, "applied_feedback": 0, "error": "the rogue wrote no result"}
        return {
            "rate_per_kind": self.spec.rogue.rate if self.spec.rogue else 0,
            "duration_s": self.spec.rogue.duration_s if self.spec.rogue else 0,
            "sent": sent.get("sent", {}), "send_errors": sent.get("send_errors", 0),
            "applied": {"feedback": int(sent.get("applied_feedback", 0)),
                        "host_records": self.forged_flows, "reports": self.forged_hops},
            "rejected": {"controller": dict(collector.get("rejected") or {}),
                         "controller_confirmations": dict(collector.get("confirm_rejected") or {})},
            "memory": memory,
            "memory_flat": all(m["flat"] for m in memory.values()) if memory else None,
            "rss_mib_start": {n: m["start_mib"] for n, m in memory.items()},
            "rss_growth_mib": {n: round(m["end_mib"] - m["start_mib"], 1)
                               for n, m in memory.items()},
            "telemetry": {k: collector.get(k) for k in ("host_records", "reports", "agent_batches",
                                                        "agent_lost_batches", "socket_drops")},
        }


def agent_rejections(logs: Path) -> dict[str, dict[str, Any]]:
    """Each agent's last counters (``ebpf.agent: final {...}``) from its log."""
    out = {}
    for log in sorted(logs.glob("agent-*.log")):
        for line in reversed(log.read_text(errors="replace").splitlines()):
            if line.startswith(FINAL_PREFIX):
                try:
                    out[log.stem.removeprefix("agent-")] = json.loads(line[len(FINAL_PREFIX):])
                except ValueError:
                    pass
                break
    return out


def rogue_comparison(summaries: list[tuple[ExperimentSpec, dict[str, Any]]]) -> dict[str, Any] | None:
    """``summary.json["rogue"]`` of a sweep: the run with the rogue against the one
    without it (goodput ratio, telemetry lost), plus its counts."""
    with_rogue = [(sp, s) for sp, s in summaries if sp.rogue and sp.rogue.rate > 0 and "rogue" in s]
    without = [s for sp, s in summaries if not (sp.rogue and sp.rogue.rate > 0)]
    if not with_rogue:
        return None
    _sp, s = with_rogue[0]
    r = dict(s["rogue"])
    base = without[0] if without else None

    def goodput(x: dict[str, Any]) -> float:
        return float(x.get("goodput_tx_bps_total") or 0.0)

    r["goodput_ratio"] = (goodput(s) / goodput(base)) if base and goodput(base) > 0 else None
    if base and base.get("memory"):
        r["baseline_memory"] = base["memory"]
    r["baseline_goodput_bps"] = goodput(base) if base else None
    return r


def finish_rogue(out: dict[str, Any], logs: Path) -> dict[str, Any]:
    """Add the agents' refusals (their logs are complete once they stopped) and the
    totals per kind: ``rejected`` = {feedback, host_records, reports, by_reason}."""
    agents = agent_rejections(logs)
    ctl = out["rejected"]["controller"]
    by_reason: dict[str, int] = {}
    for a in agents.values():
        for k, n in (a.get("auth_rejected") or {}).items():
            by_reason[f"feedback_{k}"] = by_reason.get(f"feedback_{k}", 0) + int(n)
    for k, n in ctl.items():
        key = k if k == "report_source" else f"host_records_{k.removeprefix('agent_')}"
        by_reason[key] = by_reason.get(key, 0) + int(n)
    out["rejected"] = {
        "feedback": sum(n for k, n in by_reason.items() if k.startswith("feedback_")),
        "host_records": sum(n for k, n in by_reason.items() if k.startswith("host_records_")),
        "reports": by_reason.get("report_source", 0), "by_reason": by_reason,
        "controller_confirmations": out["rejected"].get("controller_confirmations", {})}
    # datagrams the agents read past their kernel socket filter (forged and genuine)
    out["received"] = {"feedback": sum(int(a.get("feedback_datagrams", 0))
                                       for a in agents.values())}
    out["agents"] = agents
    out.setdefault("goodput_ratio", None)   # set by rogue_comparison in a sweep
    return out


def format_rogue(r: dict[str, Any]) -> str:
    """One line: sent / rejected / applied per kind, goodput ratio, memory growth."""
    kinds = ("feedback", "host_records", "reports")
    parts = [f"{k} sent {r['sent'].get(k, 0)} rejected {r['rejected'].get(k, 0)} "
             f"applied {r['applied'].get(k, 0)}" for k in kinds]
    gp = r.get("goodput_ratio")
    mem = max(r.get("rss_growth_mib", {}).values(), default=0.0)
    flat = r.get("memory_flat")
    return ("; ".join(parts) + f"; goodput {'-' if gp is None else f'{100 * gp:.0f} %'} of "
            f"the run without the rogue; largest memory growth {mem:.1f} MiB"
            + ("" if flat is None else " (flat)" if flat else " (NOT flat)"))


def format_memory(r: dict[str, Any]) -> list[str]:
    """One line per watched process: MiB at the flood's start, peak and end (and, from
    the run without the rogue, the growth from the same moment to its end)."""
    base = r.get("baseline_memory") or {}
    out = []
    for n, m in (r.get("memory") or {}).items():
        line = (f"{n:<14} start {m['start_mib']:6.1f} MiB  peak {m['peak_mib']:6.1f}  "
                f"end {m['end_mib']:6.1f}  {'flat' if m['flat'] else 'GREW'}")
        if n in base:
            line += f" (without the rogue: {base[n]['end_mib'] - base[n]['start_mib']:+.1f} MiB)"
        out.append(line)
    return out
