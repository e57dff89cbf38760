"""`controller web --out DIR` on a recorded run, opened in headless Chromium: the page
shows the topology, every link direction, the flows, the loss map, the diagnosis, the
mitigation's actions and the alerts, with the lossy link in red and routed around."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from .browser import artifacts, page
from .webfix import ROOT, recorded_state, results_folder

pytestmark = pytest.mark.browser


def _serve(out: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen([sys.executable, "-m", "controller", "web", "--out", str(out), "--web",
                          "127.0.0.1:0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    line = p.stdout.readline()          # "live view of OUT at http://127.0.0.1:PORT/"
    if "http://" not in line:
        p.kill()
        raise AssertionError(f"controller web said {line!r}; stderr {p.communicate()[1]!r}")
    return p, line.split(" at ", 1)[1].strip()


def test_recorded_run_in_a_real_browser(tmp_path: Path) -> None:
    from controller.topology import directed_links, load_topology
    topo = load_topology(str(ROOT / "mininet_topos" / "topofiles" / "dumbbell.yaml"))
    lossy = directed_links(topo)[0].name
    out = results_folder(tmp_path / "demo", recorded_state(lossy=lossy))
    proc, url = _serve(out)
    try:
        with page() as pg:
            pg.goto(url)
            pg.wait_for_selector("body[data-ready='1']", timeout=20_000)
            rows = pg.locator("#links tbody tr")
            names = rows.evaluate_all("rs => rs.map(r => r.dataset.link)")
            assert set(names) >= {d.name for d in directed_links(topo)}
            assert pg.locator(f"#links tr[data-link='{lossy}']").get_attribute("data-health") == "red"
            others = [n for n in names if n != lossy]
            assert all(pg.locator(f"#links tr[data-link='{n}']").get_attribute("data-health") != "red"
                       for n in others)
            assert pg.locator("#flows tbody tr").count() == 1
            assert "(8, 1)" in pg.locator("#flows tbody tr").inner_text()
            alert = pg.locator("#alerts tbody tr[data-state='firing']")
            assert alert.count() == 1 and alert.get_attribute("data-subject") == lossy
            assert lossy in pg.locator("#diagnosis").inner_text()
            # the mitigation's action, its reason and the link it keeps the routes off
            act = pg.locator("#mitigation tbody tr[data-verb='reroute']")
            assert act.count() == 1 and act.get_attribute("data-outcome") == "written"
            assert f"gray_loss on {lossy}" in act.inner_text()
            assert "loss_rate" in (act.locator("td").nth(4).get_attribute("title") or "")
            assert "mode act" in pg.locator("#mitigation-mode").inner_text()
            avoided = rows.evaluate_all("rs => rs.filter(r => r.dataset.avoided === '1').map(r => r.dataset.link)")
            link = next(d.link for d in directed_links(topo) if d.name == lossy)
            assert set(avoided) == {d.name for d in directed_links(topo) if d.link == link}
            # plotly drew the graph (one line per direction + the nodes) and the heat map
            assert pg.locator("#graph .scatterlayer .trace").count() >= len(names) + 1
            assert pg.locator("#heatmap .hm, #heatmap image").count() >= 1
            assert pg.locator("#status").get_attribute("data-state") == "recorded"
            assert pg.errors == []    # type: ignore[attr-defined]
            pg.screenshot(path=str(artifacts() / "recorded_run.png"), full_page=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
