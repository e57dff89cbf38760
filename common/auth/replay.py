"""Replay protection: one sliding window per (sender, frame kind).

A frame's sequence is (epoch, counter) (``formats.auth``).  A later epoch means the
sender restarted: the window starts again from that frame, so a restart never causes
false rejections.  Within the current epoch a counter above the highest seen moves
the window; one inside the window is accepted once (reordering is fine); a repeat is
``replay`` and anything below the window ``too_old``.  An earlier epoch is
``old_epoch`` (a recording of an earlier run of the sender).
"""
from __future__ import annotations

__all__ = ["ReplayWindow"]


class ReplayWindow:
    """Highest counter seen and a bitmap of the ``size`` counters below it."""

    __slots__ = ("bits", "epoch", "size", "top")

    def __init__(self, size: int = 1024) -> None:
        if size < 1:
            raise ValueError(f"replay window size {size}: expected >= 1")
        self.size = size
        self.epoch = -1
        self.top = -1
        self.bits = 0

    def check(self, epoch: int, counter: int) -> str | None:
        """Rejection reason for (epoch, counter), or None (then it is recorded as seen).
        Call only after the frame's tag checked out: forgeries must not move the window."""
        if epoch > self.epoch:
            self.epoch, self.top, self.bits = epoch, counter, 1
            return None
        if epoch < self.epoch:
            return "old_epoch"
        if counter > self.top:
            shift = counter - self.top
            self.bits = ((self.bits << shift) | 1) & ((1 << self.size) - 1) if shift < self.size else 1
            self.top = counter
            return None
        back = self.top - counter
        if back >= self.size:
            return "too_old"
        if (self.bits >> back) & 1:
            return "replay"
        self.bits |= 1 << back
        return None
