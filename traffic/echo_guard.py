"""Checks on the INT echoed in an ACK before an HPCC sender reacts to it.

Why: the echo (:mod:`formats.int_echo`) travels behind the ACK's ICRC and nothing
authenticates it, as on HPCC NICs: the ICRC is a CRC, not a MAC, so whoever can send
UDP to the sender's port can forge an ACK with any hop records and steer the rate of a
QP (a huge queue or a tiny line rate cuts it to the minimum; an idle path raises it to
the line rate).  The endpoint already drops an echo whose trailer is wrong
(``bad_echo``) and an ACK for a QP it does not have or from another address than the
QP's peer (``unknown_qp``, ``wrong_peer``), echo and all.  ``EchoGuard`` then takes an
echo only when it is plausible for this QP, and counts every refusal by reason:

==========  ==============================================================
reason      the echo ...
==========  ==============================================================
psn_window  rides on an ACK whose PSN is not in the QP's window: beyond what
            it sent, or more than a window behind its oldest unacknowledged
hop_count   has no hop, or more than the program's bound (``MAX_HOPS``)
queue_bytes has a hop queue above ``max_queue_bytes`` (more than any switch
            buffer holds)
line_rate   has a hop line rate of 0 (no sample possible) or above
            ``max_line_rate_mbps``
==========  ==============================================================

What stays possible (README, Security): an off-path host that guesses the QP number,
the peer's address and an in-window PSN can still send plausible values, e.g. a queue
of a few BDPs, and slow the QP down; HPCC itself offers no defence against that, and
the remedy is the network's (source address validation, keeping the data network
closed).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from formats.int_echo import EchoHop
from formats.int_md import MAX_HOPS

__all__ = ["ECHO_REJECT_REASONS", "EchoGuard"]

ECHO_REJECT_REASONS = ("psn_window", "hop_count", "queue_bytes", "line_rate")


@dataclass(slots=True, kw_only=True)
class EchoGuard:
    """Plausibility checks of one sender QP's echoes; ``rejected`` counts by reason."""

    max_hops: int = MAX_HOPS
    max_queue_bytes: int = 128 << 20       # above today's largest switch buffers (~100 MB)
    max_line_rate_mbps: int = 1_600_000    # 1.6 Tbit/s
    accepted: int = 0
    rejected: dict[str, int] = field(default_factory=dict)

    def check(self, hops: Sequence[EchoHop], *, ack_seq: int, una: int, next_seq: int,
              window_pkts: int) -> str | None:
        """The reason to refuse this echo (counted), or None to take it.

        ``ack_seq``: the sequence the ACK names (cumulative: first not acknowledged);
        ``una`` / ``next_seq``: the QP's oldest unacknowledged and next new sequence;
        ``window_pkts``: how far behind ``una`` a late (reordered) ACK may still be.
        """
        why = None
        if not una - max(1, window_pkts) <= ack_seq <= next_seq:
            why = "psn_window"
        elif not 1 <= len(hops) <= self.max_hops:
            why = "hop_count"
        else:
            for h in hops:
                if h.queue_bytes > self.max_queue_bytes:
                    why = "queue_bytes"
                    break
                if not 1 <= h.line_rate <= self.max_line_rate_mbps:
                    why = "line_rate"
                    break
        if why is None:
            self.accepted += 1
        else:
            self.rejected[why] = self.rejected.get(why, 0) + 1
        return why
