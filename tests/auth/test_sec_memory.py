"""The rogue experiment's memory watch (``mininet_topos.testbed.memory``): readings
from /proc, the start / peak / end of each process around the watched phase and the
wide "flat" margin."""
from __future__ import annotations

import os
from pathlib import Path

from mininet_topos.testbed.memory import MemoryWatch, is_flat, read_rss_kib


def _status(proc: Path, pid: int, kib: int, name: str = "python3") -> None:
    d = proc / str(pid)
    d.mkdir(parents=True, exist_ok=True)
    (d / "status").write_text(f"Name:\t{name}\nUmask:\t0022\nVmPeak:\t  999999 kB\n"
                              f"VmRSS:\t {kib} kB\nThreads:\t3\n")


def test_reads_this_process() -> None:
    got = read_rss_kib(os.getpid())
    assert got is not None and got[0] > 1000 and got[1]
    assert read_rss_kib(0x7FFFFFF0) is None


def test_start_peak_end_around_the_phase(tmp_path: Path) -> None:
    _status(tmp_path, 10, 50_000)
    _status(tmp_path, 11, 40_000, "python3")
    w = MemoryWatch({"controller": 10, "agent-h1": 11, "gone": 12}, proc=tmp_path)
    w.sample()
    _status(tmp_path, 10, 80_000)            # start-up growth before the flood: not counted
    w.mark_start()
    for kib in (90_000, 120_000, 85_000):    # a peak during the flood, back down after
        _status(tmp_path, 10, kib)
        _status(tmp_path, 11, 40_000 + kib // 2)   # ends 40 MiB above its start
        w.sample()
    s = w.summary()
    assert set(s) == {"controller", "agent-h1"}      # a process never seen is left out
    c = s["controller"]
    assert (c["first_mib"], c["start_mib"], c["peak_mib"], c["end_mib"]) == (
        round(50_000 / 1024, 1), round(80_000 / 1024, 1), round(120_000 / 1024, 1),
        round(85_000 / 1024, 1))
    assert c["samples"] == 5 and c["flat"] and c["comm"] == "python3"
    a = s["agent-h1"]
    assert a["start_mib"] == round(40_000 / 1024, 1) and not a["flat"]


def test_flat_margin() -> None:
    assert is_flat(40.0, 56.0) and not is_flat(40.0, 56.5)      # 16 MiB for small ones
    assert is_flat(200.0, 240.0) and not is_flat(200.0, 241.0)  # 20 % for large ones
    assert is_flat(100.0, 20.0)


def test_poll_starts_at_the_given_time(tmp_path: Path) -> None:
    _status(tmp_path, 10, 30_000)
    w = MemoryWatch({"controller": 10}, proc=tmp_path, start_at=100.0)
    w.poll(99.0)
    _status(tmp_path, 10, 60_000)
    w.poll(100.5)                         # the start
    _status(tmp_path, 10, 61_000)
    w.poll(101.0)
    c = w.summary()["controller"]
    assert w.started and c["start_mib"] == round(60_000 / 1024, 1)
    assert c["first_mib"] == round(30_000 / 1024, 1) and c["end_mib"] == round(61_000 / 1024, 1)


def test_sweep_summary_compares_with_the_run_without_the_rogue() -> None:
    from mininet_topos.experiment.rogue_run import format_memory, rogue_comparison
    from mininet_topos.experiment.spec import load_spec

    specs = load_spec(Path(__file__).resolve().parents[2] / "mininet_topos" / "presets"
                      / "rogue.yaml")
    mem = {"controller": {"start_mib": 300.0, "peak_mib": 306.0, "end_mib": 306.0,
                          "flat": True}}
    base = {"controller": {"start_mib": 290.0, "peak_mib": 295.0, "end_mib": 295.5,
                           "flat": True}}
    r = rogue_comparison([(specs[0], {"goodput_tx_bps_total": 8e6, "memory": base}),
                          (specs[1], {"goodput_tx_bps_total": 8e6,
                                      "rogue": {"memory": mem, "memory_flat": True}})])
    assert r is not None and r["baseline_memory"] == base
    assert format_memory(r) == [("controller     start  300.0 MiB  peak  306.0  end  306.0  "
                                 "flat (without the rogue: +5.5 MiB)")]
