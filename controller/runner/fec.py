"""Per-flow FEC from the link loss map: flows' switch paths -> link rows -> (k, m).

Why here: `controller.lossmap` chooses codes from link models and link-index paths;
the runner knows which switches each flow crossed (the INT path, node IDs) and which
directed link joins two switches, so it builds the paths and ships the decisions
with the rate feedback (`FeedbackSender.send_fec`).
"""
from __future__ import annotations

import itertools

import numpy as np

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
    """(k, m) per flow meeting `target_residual` over the links of its path."""
    models = fit_link_models(stream.snapshot())
    return path_fec(paths=paths, models=models, target_residual=target_residual)
