"""Losses no link sequence number sees: what the switches and hosts count themselves.

Why apart from the link counters: a packet a switch's queue tail-drops never reaches
egress, where the link sequence number is stamped, and a frame the kernel drops on a
full receive socket (the Python switch's own, or the receiving rank's) never reaches
any counter downstream; only the switch's or host's own statistics see them
(``Telemetry.port_drops``, ``port_rx_drops``, ``host_drops``: cumulative counts
sampled over time).  These say whether a slowed pair lost its packets inside the
network or in the receiving host.
"""
from __future__ import annotations

from collections.abc import Iterable

from controller.diagnose.evidence import Telemetry

__all__ = ["COUNT_LAG_S", "host_drops", "increase", "lost_in_switches", "path_drops"]


def increase(series: list[tuple[float, int]], t0: float, t1: float) -> int:
    """How much a cumulative counter sampled as ``series`` (time-sorted) grew between
    ``t0`` and ``t1``: its last sample by ``t1`` minus its last sample by ``t0`` (the
    first sample after ``t0`` when none was taken before it)."""
    before = [n for t, n in series if t <= t0]
    upto = [n for t, n in series if t <= t1]
    if not upto:
        return 0
    base = before[-1] if before else next(n for t, n in series if t > t0)
    return max(0, upto[-1] - base)


def _ends(link: str) -> tuple[tuple[str, int], tuple[str, int]] | None:
    try:
        a, b = link.split("->")
        (na, pa), (nb, pb) = a.split(":"), b.split(":")
        return (na, int(pa)), (nb, int(pb))
    except ValueError:
        return None


def path_drops(tel: Telemetry, path: Iterable[str], t0: float, t1: float) -> int:
    """Packets the switches on ``path`` (directed links ``s7:3->s5:1``) dropped between
    ``t0`` and ``t1`` where no link counter sees them: tail drops of the queue at each
    link's sending port and frames dropped on the full receive socket at its receiving
    port."""
    n = 0
    for link in path:
        ends = _ends(link)
        if ends is None:
            continue
        near, far = ends
        n += increase(tel.port_drops.get(near, []), t0, t1)
        n += increase(tel.port_rx_drops.get(far, []), t0, t1)
    return n


def host_drops(tel: Telemetry, host: str, t0: float, t1: float) -> int:
    """Datagrams ``host`` dropped on its full UDP sockets between ``t0`` and ``t1``."""
    return increase(tel.host_drops.get(host, []), t0, t1)


#: the switches rewrite their statistics every 0.2 s and the test bed reads them every
#: 0.2 s: a drop shows in the samples up to this long after it happened
COUNT_LAG_S = 0.6


def lost_in_switches(tel: Telemetry, transfers: Iterable[tuple[float, float, int]],
                     data_paths: list[tuple[str, ...]], ack_paths: list[tuple[str, ...]]
                     ) -> int:
    """How many of ``transfers`` ((start, end, packets resent), Unix s) resent packets
    while the switches on the pair's data or ACK paths dropped packets (from just
    before the start to the end plus the counters' lag): transfers the network's own
    losses slowed."""
    paths = [*data_paths, *ack_paths]
    return sum(1 for t0, t1, retx in transfers if retx > 0 and any(
        path_drops(tel, p, t0 - 0.2, t1 + COUNT_LAG_S) > 0 for p in paths))
