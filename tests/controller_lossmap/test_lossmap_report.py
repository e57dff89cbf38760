"""Printed tables (golden text)."""
from __future__ import annotations

import numpy as np

from controller.lossmap import LossEvents, TimeBins, link_loss_map
from controller.lossmap.policy import PathFec
from controller.lossmap.report import fec_table, link_table

GOLDEN_LINKS = """\
link         source     lost     deliv  loss %         95 % CI
s1-s2        event         3        88   3.297     1.127-9.249
s2-s3        none          0         0       -"""

GOLDEN_FEC = """\
flow             raw loss %          FEC   residual  retransmit
h1>h2                 1.000     k=16 m=2   2.00e-05  no
h3>h2                 0.000         none   0.00e+00  no"""


def test_link_table_golden():
    ev = LossEvents(link_idx=[0, 0], ts_ns=[1, 2], expected=[10, 100], received=[12, 101])
    m = link_loss_map(bins=TimeBins(start_ns=0, bin_ns=10, n_bins=1), n_links=2, events=ev,
                      event_links=[0])
    assert "\n".join(link_table(m, ["s1-s2", "s2-s3"])) == GOLDEN_LINKS


def test_fec_table_golden():
    fec = PathFec(fec_k=np.array([16, 0]), fec_m=np.array([2, 0]),
                  retransmit=np.array([False, False]), residual_loss=np.array([2e-5, 0.0]),
                  raw_loss=np.array([0.01, 0.0]))
    out = fec_table(fec, ["h1>h2", "h3>h2"])
    assert "\n".join(out) == GOLDEN_FEC
    assert all(len(line) < 80 for line in out)
