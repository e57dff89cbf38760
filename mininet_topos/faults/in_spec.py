"""Faults named in an experiment spec (``faults:`` list), run by ``run_experiment``.

Why a separate object: the experiment runner only has to ask for each rank's extra
options, call :meth:`SpecFaults.tick` in its loop and :meth:`SpecFaults.finish` at
the end; this module applies each fault at its onset, heals it after its duration
(or at the end), records the ground truth (``faults.json``) and puts the diagnosis of
the run (the ranks' collective logs and the test bed's counters) under
``diagnosis`` in the summary.  Network faults need kernel routers
(``switch: linux-router``); host faults (slow receiver, straggler) work on any.
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from controller.topology.model import Topology
from mininet_topos.faults.inject import Injector, traffic_fault_args
from mininet_topos.faults.spec import FaultError, FaultSpec, parse_fault

__all__ = ["SpecFaults", "check_spec_faults"]

_HOST_KINDS = ("slow_receiver", "straggler")


def check_spec_faults(raw: Sequence[Mapping[str, Any]], topo: Topology, *, nranks: int,
                      switch: str) -> list[FaultSpec]:
    out = []
    for i, item in enumerate(raw):
        try:
            f = parse_fault(item, topo, nranks=nranks)
        except FaultError as exc:
            raise FaultError(f"experiment spec: faults[{i}]: {exc}") from None
        if f.kind not in _HOST_KINDS and switch != "linux-router":
            raise FaultError(f"experiment spec: faults[{i}]: {f.kind} is injected on kernel "
                             "routers only (switch: linux-router)")
        out.append(f)
    return out


class SpecFaults:
    """The faults of one run: options for the ranks, injection, ground truth, diagnosis."""

    def __init__(self, faults: list[FaultSpec], *, topo: Topology, hosts: Sequence[str],
                 start_unix: float, out: Path,
                 on_exit: Callable[[Callable[[], None]], None] | None = None) -> None:
        self.faults, self.topo, self.hosts = faults, topo, list(hosts)
        self.start, self.out = start_unix, out
        self.logs = out / "collectives"
        self._inj: list[Injector | None] = [None] * len(faults)
        self._done = [f.kind in _HOST_KINDS for f in faults]
        self._applied = [False] * len(faults)
        if on_exit is not None:   # healed also when the run fails
            on_exit(self.heal)

    def rank_args(self, rank: int) -> list[str]:
        args = ["--coll-log", str(self.logs)]
        for f in self.faults:
            args += traffic_fault_args(f, rank, self.hosts, self.start)
        return args

    def prepare(self, tb: Any) -> None:
        """Before the ranks start: what needs time to come up (background senders, eBPF
        droppers attached with loss off)."""
        for i, f in enumerate(self.faults):
            if f.kind in ("congestion", "gray_loss", "link_down") and self._inj[i] is None:
                inj = self._inj[i] = Injector(tb=tb, topo=self.topo)
                inj.prepare(f, self.start + f.onset_s)

    def tick(self, tb: Any) -> None:
        now = time.time()
        for i, f in enumerate(self.faults):
            if self._done[i]:
                continue
            inj = self._inj[i]
            if now >= self.start + f.onset_s and not self._applied[i]:
                inj = self._inj[i] = inj or Injector(tb=tb, topo=self.topo)
                inj.apply(f)
                self._applied[i] = True
            elif inj is not None and now >= self.start + f.onset_s + f.duration_s:
                inj.heal()
                self._done[i] = True

    def heal(self) -> None:
        for inj in self._inj:
            if inj is not None:
                inj.heal()

    def finish(self, samples_dir: Path) -> dict[str, Any]:
        """Heal, write faults.json, diagnose: the summary's ``faults`` and ``diagnosis``."""
        from controller.diagnose import Evidence, diagnose
        from controller.diagnose.report import format_diagnosis
        from mininet_topos.faults.telemetry import telemetry_from_samples
        from traffic.collog import read_logs

        self.heal()
        truth = [f.truth(self.start) for f in self.faults]
        for t, inj in zip(truth, self._inj, strict=True):
            if inj is not None and inj.drops:   # what the fault dropped: did it act?
                t["injected_drops"] = dict(inj.drops)
        (self.out / "faults.json").write_text(json.dumps(truth, indent=1))
        records = read_logs([self.logs]) if self.logs.is_dir() else []
        tel = telemetry_from_samples(self.topo, samples_dir, since_unix=self.start - 1)
        d = diagnose(Evidence(topo=self.topo, records=records, telemetry=tel))
        (self.out / "diagnosis.txt").write_text(format_diagnosis(d) + "\n")
        return {"faults": truth, "diagnosis": d.as_dict()}
