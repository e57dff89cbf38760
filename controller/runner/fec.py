"""Per-flow FEC from the link loss map: flows' switch paths -> link rows -> (k, m).

Why here: `controller.lossmap` chooses codes from link models and link-index paths;
the runner knows which switches each flow crossed (the INT path, node IDs) and which
directed link joins two switches, so it builds the paths and ships the decisions
with the rate feedback (`FeedbackSender.send_fec`).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from controller.lossmap.links import LinkLossMap
from controller.lossmap.policy import PathFec, fit_link_models, path_fec
from controller.lossmap.stream import LinkLossStream
from controller.topology import DirectedLink


def link_rows_by_switch_pair(links: list[DirectedLink], node_ids: dict[str, int]) -> dict[tuple[int, int], int]:
    """(sending switch node ID, receiving switch node ID) -> row of the first link joining them."""
    out: dict[tuple[int, int], int] = {}
    for i, d in enumerate(links):
        key = (node_ids.get(d.src, 0), node_ids.get(d.dst, 0))
        out.setdefault(key, i)
    return out


def flow_paths(path_node: np.ndarray, hop_count: np.ndarray, rows: dict[tuple[int, int], int]) -> list[list[int]]:
    """Link rows crossed by each flow (consecutive INT hops, source first)."""
    out: list[list[int]] = []
    for nodes, n in zip(path_node.tolist(), hop_count.tolist(), strict=True):
        hops = nodes[: int(n)]
        out.append([rows[(a, b)] for a, b in itertools.pairwise(hops) if (a, b) in rows])
    return out


def choose_flow_fec(stream: LinkLossStream, paths: list[list[int]], *, target_residual: float) -> PathFec:
    """(k, m) per flow meeting `target_residual` over the links of its path
    (:class:`FecPolicy` with its defaults, on the stream's loss map)."""
    return FecPolicy(target_residual=target_residual).decide(stream.snapshot(), paths)


@dataclass(slots=True, kw_only=True)
class FecPolicy:
    """The FEC policy, one for the whole project: a link loss map -> a burst model per
    link -> per flow the (k, m) that keeps its path's residual loss under
    ``target_residual``, and which flows' codes changed since the last round.

    The running controller applies it to its P4Runtime link counters and the INT paths
    and sends the codes with its rate feedback; the test bed runs the same policy
    where no controller runs (kernel routers: ``mininet_topos.experiment.fec``), on
    the switches' counter samples, and sends the codes to the senders' control sockets.
    """

    target_residual: float
    k_choices: tuple[int, ...] = (4, 8, 16, 32, 64)
    m_max: int = 16
    min_packets: int = 0
    """Links that carried fewer packets count as loss-free (their few losses are the
    noise of two ends sampled at different instants); 0: every link as measured."""
    current: dict[int, tuple[int, int]] = field(default_factory=dict)
    """The (k, m) last reported per flow by :meth:`changes`."""

    def decide(self, link_map: LinkLossMap, paths: list[list[int]]) -> PathFec:
        """(k, m) per flow of ``paths`` (link rows) from ``link_map``."""
        if self.min_packets:
            link_map.lost = np.maximum(link_map.lost, 0)
            link_map.lost[link_map.lost + link_map.delivered < self.min_packets] = 0
        return path_fec(paths=paths, models=fit_link_models(link_map),
                        target_residual=self.target_residual, k_choices=self.k_choices,
                        m_max=self.m_max)

    def changes(self, dec: PathFec) -> list[tuple[int, int, int]]:
        """``(flow, k, m)`` for every flow whose code differs from the last one reported
        (k = 0, no FEC, as k = 1, m = 0: what senders take); remembered as sent."""
        out = []
        for j in range(len(dec.fec_k)):
            k, m = int(dec.fec_k[j]), int(dec.fec_m[j])
            k, m = (k, m) if k > 0 else (1, 0)
            if self.current.get(j) != (k, m):
                out.append((j, k, m))
        return out

    def sent(self, flow: int, k: int, m: int) -> None:
        """``flow`` now runs (k, m) (call after the code reached its sender)."""
        self.current[flow] = (k, m)
