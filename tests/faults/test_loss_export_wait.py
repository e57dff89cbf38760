"""The harness waits for the controller's last link-loss bin of a trial (bounded)."""
from __future__ import annotations

from pathlib import Path

from mininet_topos.faults.p4 import last_loss_export, wait_for_loss_export


def _write(d: Path, rows: list[str]) -> None:
    (d / "csv").mkdir(parents=True, exist_ok=True)
    (d / "csv" / "link_loss.csv").write_text(
        "time_ns,link,lost,delivered,loss_rate\n" + "".join(r + "\n" for r in rows))


def test_newest_bin_is_read_from_the_tail(tmp_path: Path) -> None:
    assert last_loss_export(tmp_path) is None
    _write(tmp_path, [])
    assert last_loss_export(tmp_path) is None
    _write(tmp_path, [f"{(100 + i) * 10**9},s1:3->s5:3,0,5,0.0" for i in range(500)])
    assert last_loss_export(tmp_path) == 599.0


def test_wait_returns_once_the_bin_is_there_or_gives_up(tmp_path: Path) -> None:
    _write(tmp_path, ["100000000000,s1:3->s5:3,0,5,0.0"])
    assert wait_for_loss_export(tmp_path, 100.0, timeout_s=0.0)
    assert not wait_for_loss_export(tmp_path, 101.0, timeout_s=0.0)
