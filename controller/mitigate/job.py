"""The job as the mitigation sees it: which host runs each rank, which spare hosts hold
a standby rank, and where each listens for commands (its control socket).

Why a file the launcher writes: the controller sees hosts and flows, not ranks; the
job's launcher (the test bed's harness, a real job's agent) knows the ranks, their
hosts and the spares it started idle (``python -m traffic allreduce --standby``), and
how to reach each (a UNIX socket path; the test bed's hosts share the file system).
A rank move (``traffic.rankmove``) needs all of it.

Format (JSON): ``{"ranks": ["h1", "h3", ...], "spares": ["h2", ...],
"controls": {"h1": "/path/ctl-h1", ...}}`` (``ranks[i]`` is rank i's host).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.topology import Topology

__all__ = ["Job", "JobError"]


class JobError(ValueError):
    """The job file is unreadable or names hosts the topology does not have."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    ranks: tuple[str, ...]            # rank i -> host name
    spares: tuple[str, ...]           # hosts with a standby rank
    controls: Mapping[str, str]       # host -> control socket path
    ips: Mapping[str, str]            # host -> IPv4 address (from the topology)
    leaves: Mapping[str, str]         # host -> its switch (from the topology)

    @classmethod
    def from_dict(cls, d: object, topo: Topology, where: str = "job") -> Job:
        if not isinstance(d, dict):
            raise JobError(f"{where}: expected a JSON object")
        ranks, spares, controls = d.get("ranks"), d.get("spares", []), d.get("controls")
        known = {h.name: h for h in topo.hosts}
        for key, v in (("ranks", ranks), ("spares", spares)):
            if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
                raise JobError(f"{where}: {key} must be a list of host names")
            bad = [x for x in v if x not in known]
            if bad:
                raise JobError(f"{where}: {key}: {', '.join(bad)} not in the topology")
        assert isinstance(ranks, list) and isinstance(spares, list)
        if len(set(ranks)) != len(ranks) or set(ranks) & set(spares):
            raise JobError(f"{where}: a host runs one rank at most, and a spare runs none")
        if not isinstance(controls, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in controls.items()):
            raise JobError(f"{where}: controls must map host names to socket paths")
        missing = [h for h in [*ranks, *spares] if h not in controls]
        if missing:
            raise JobError(f"{where}: controls: no socket for {', '.join(missing)}")
        return cls(ranks=tuple(ranks), spares=tuple(spares), controls=dict(controls),
                   ips={h: known[h].ipv4 for h in [*ranks, *spares]},
                   leaves={h: known[h].switch for h in [*ranks, *spares]})

    @classmethod
    def load(cls, path: str | Path, topo: Topology) -> Job:
        try:
            d = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise JobError(f"job file {path}: {e}") from None
        return cls.from_dict(d, topo, where=f"job file {path}")

    def rank_controls(self, hosts: Mapping[int, str] | None = None) -> list[str]:
        """Control socket of each rank, in rank order (``hosts``: ranks moved since)."""
        now = {**dict(enumerate(self.ranks)), **(hosts or {})}
        return [self.controls[now[r]] for r in range(len(self.ranks))]
