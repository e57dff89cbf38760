"""SIGTERM ends a rank on either engine with its summary written; the runner also
stops on its stop flag (a KeyboardInterrupt swallowed by a finaliser must not leave a
rank running until its timeout)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from traffic.endpoint import EndpointConfig
from traffic.native_endpoint import engine_available
from traffic.runner import QpParams, RankRunner
from traffic.workloads import Pattern, make_plan, parse_size_dist

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ["python"] + (["native"] if engine_available() else [])


@pytest.mark.parametrize("engine", ENGINES)
def test_sigterm_ends_a_waiting_rank_with_its_summary(tmp_path: Path, engine: str) -> None:
    ctl, out = tmp_path / "ctl.sock", tmp_path / "r1.json"
    p = subprocess.Popen([sys.executable, "-m", "traffic", "p2p", "--hosts",
                          "127.0.78.1,127.0.78.2", "--rank", "1", "-c", "5", "--control",
                          str(ctl), "-o", str(out), "--engine", engine],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().startswith("ready rank 1")
        p.send_signal(signal.SIGTERM)
        p.send_signal(signal.SIGTERM)  # a second signal must not cost the summary
        stdout, err = p.communicate(timeout=60)  # a bound, not a speed check
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 130 and "interrupted" in err
    summary = json.loads(out.read_text())
    assert summary["interrupted"] and summary["engine"] == engine
    assert json.loads(stdout.strip().splitlines()[-1])["engine"] == engine
    assert not ctl.exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_runner_stops_on_its_flag(engine: str) -> None:
    plan = make_plan(Pattern.P2P, rank=1, nranks=2, qps=1, count=3,
                     sizes=parse_size_dist("4K"), seed=1, prefill=None)
    runner = RankRunner(plan, ["127.0.79.1", "127.0.79.2"], EndpointConfig(ip="127.0.79.2"),
                        QpParams(), engine=engine)
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 3

    summary = runner.run(timeout_s=600, stop=stop)
    assert summary["interrupted"] and not summary["finished"]
