"""The harness scales a slow receiver's hold with the target's own transfer time, so
the fault slows the ring by the same share on a Python switch as at kernel speed."""
from __future__ import annotations

import pytest

from mininet_topos.faults.harness import KERNEL_TRANSFER_S, host_fault_scale


@pytest.mark.parametrize(("warm_s", "scale"), [
    (None, 1.0), (0.0, 1.0), (0.1, 1.0), (KERNEL_TRANSFER_S, 1.0),
    (0.3, 1.5), (1.2, 6.0), (5.0, 10.0),
])
def test_scale_follows_the_warm_up_transfer_time(warm_s: float | None, scale: float) -> None:
    assert host_fault_scale(warm_s) == pytest.approx(scale)
