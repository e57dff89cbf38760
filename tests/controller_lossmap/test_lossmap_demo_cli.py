"""The loss-map demo: monitored links exact, the unmonitored lossy link found by voting."""
from __future__ import annotations

from controller.lossmap.__main__ import main


def test_demo_table_and_pngs(tmp_path, capsys):
    assert main(["demo", "--packets", "30000", "--out", str(tmp_path)]) == 0
    rows = {ln.split()[0]: ln.split() for ln in capsys.readouterr().out.splitlines()}
    # columns: link source lost delivered loss% CI true
    assert rows["s1-s3"][1] == "event" and rows["s1-s3"][2] == rows["s1-s3"][-1]
    assert rows["s4-s2"][1] == "vote" and rows["s4-s2"][2] == rows["s4-s2"][-1]
    assert int(rows["s4-s2"][-1]) > 0
    for host_link in ("h1-s1", "h2-s1", "s2-h3", "s2-h4"):
        assert rows[host_link][2] == "0"
    assert (tmp_path / "loss_heatmap.png").read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "bursts_s1-s3.png").exists()


def test_demo_rejects_bad_target(capsys):
    import pytest
    with pytest.raises(SystemExit) as e:
        main(["demo", "--target", "2"])
    assert e.value.code == 2
    assert "residual loss target is in (0, 1)" in capsys.readouterr().err
