"""Final ordering rules between candidates of different kinds, from what each can cause.

Why a separate step: the engine scores each candidate alone (how well it covers the
slow pairs x how strong its own telemetry is); some conclusions need the candidates
side by side:

* A *hung* transfer (nothing delivered for seconds) needs a path that delivers
  nothing.  A link losing a few per cent delivers nearly every retransmission, so it
  cannot hang a transfer; a loaded test bed's delay lines lose ~0.3-1 % on their own.
  When transfers hang and a link fell silent under them, that dead link outranks every
  lossy-but-delivering link (and any other candidate not under a hung pair).
* When a break stalls a ring collective, the links after the stalled ranks fall
  silent too, but later: the break comes first.  Among silent links under hung pairs,
  the one silent longest ranks first.
* A router port between routers holding a standing queue while it sends far below
  its line rate is degraded whatever the collective shows: a slow receiver makes its
  senders send less, which empties the queues on the way (only the port facing the
  slow host itself could back up).  A host candidate, inferred from the collective
  alone, ranks below such a port.
* The queue at the port into a host whose own sends slowed too is that host's: a slow
  receiver processes the ACKs of its sends late as well, while a slow access link
  slows only the data into it.  The host ranks above that link.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controller.diagnose.engine import Culprit

__all__ = ["HANG_LOSS_RATE", "arbitrate"]

HANG_LOSS_RATE = 0.5   # a link delivering more than half of what it is sent cannot hang
BELOW_DEAD = 0.95      # a demoted candidate's confidence relative to the weakest dead link
SILENCE_TIE = 0.1      # how much the silence's length separates silent links
DEGRADED_TX = 0.5      # a port sending below this share of its line rate ...
QUEUED_PKTS = 8        # ... with at least this queue is degraded by itself


def _silence(c: Culprit) -> float:
    return float(c.evidence.get("silent_while_upstream_delivered_s") or 0.0)


def _dead(c: Culprit) -> bool:
    """A link the telemetry saw deliver nothing (no delivery at all, or fell silent
    under a hung transfer while the link before it still delivered)."""
    if c.kind != "link_down" or c.type != "link":
        return False
    return c.evidence.get("delivered") == 0 or _silence(c) > 0


def _cannot_hang(c: Culprit) -> bool:
    """A network component that still delivers: loss below ``HANG_LOSS_RATE``, a slow
    or shared port, a small buffer (retransmissions get through all of them)."""
    if c.kind == "gray_loss":
        return float(c.evidence.get("loss_rate") or 0.0) < HANG_LOSS_RATE
    return c.kind in ("rate_degraded", "congestion", "tiny_queue")


def arbitrate(culprits: list[Culprit], hung: bool) -> list[Culprit]:
    """``culprits`` reordered by the rules above (confidences adjusted in place), sorted
    as the engine sorts: confidence, links first, then by name."""
    dead = [c for c in culprits if _dead(c)]
    dead_ids = {id(c) for c in dead}
    if hung and dead:
        longest = max(_silence(c) for c in dead)
        if longest > 0:
            for c in dead:
                c.confidence *= 1.0 - SILENCE_TIE * (1.0 - _silence(c) / longest)
        floor = min(c.confidence for c in dead)
        for c in culprits:
            if id(c) not in dead_ids and _cannot_hang(c) and c.confidence >= floor:
                c.evidence["ranked_below_dead_link"] = "cannot hang a transfer"
                c.confidence = BELOW_DEAD * floor
    degraded = [c for c in culprits if _degraded_port(c)]
    if degraded:
        floor = min(c.confidence for c in degraded)
        for c in culprits:
            if c.kind == "slow_receiver" and c.confidence >= floor:
                c.evidence["ranked_below_degraded_port"] = degraded[0].component
                c.confidence = BELOW_DEAD * floor
    for host in [c for c in culprits if c.kind == "slow_receiver" and
                 c.evidence.get("queue_into_it")]:
        for c in culprits:
            if c.type == "link" and c.component == host.evidence["queue_into_it"] \
                    and c.confidence >= host.confidence:
                c.evidence["ranked_below_slow_receiver"] = host.component
                c.confidence = BELOW_DEAD * host.confidence
    culprits.sort(key=lambda c: (-c.confidence, c.type != "link", c.key))
    return culprits


def _degraded_port(c: Culprit) -> bool:
    """A link between routers whose feeding port queues while sending far below its
    line rate (its own telemetry, not an inference from the collective)."""
    if c.type != "link" or c.kind != "rate_degraded" or c.evidence.get("role") == "host":
        return False
    tx = c.evidence.get("tx_over_line_rate")
    return (tx is not None and tx < DEGRADED_TX
            and (c.evidence.get("queue_max_pkts") or 0) >= QUEUED_PKTS)
