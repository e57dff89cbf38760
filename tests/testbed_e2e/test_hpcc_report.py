"""The experiment's report of HPCC in the senders: reaction line and side-by-side row."""
from __future__ import annotations

from mininet_topos.experiment.report import reaction_line
from mininet_topos.experiment.runner import compare_row


def test_reaction_line_gives_median_and_max_over_qps():
    line = reaction_line([0.004, 0.0, 0.030])
    assert "3 QPs" in line and "p50 4.0 ms" in line and "max 30.0 ms" in line
    assert "no QP saw a queue" in reaction_line([])


def test_compare_row_carries_the_reaction_median():
    row = compare_row({"senders_cc": {"mode": "hpcc-sender", "rate_cuts": 9,
                                      "reaction_s": [0.03, 0.001, 0.002]}})
    assert row["rate_cuts"] == 9 and row["reaction_p50_s"] == 0.002
    assert compare_row({})["reaction_p50_s"] is None
