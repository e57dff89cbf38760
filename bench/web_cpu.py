"""The live view's cost to the controller: its CPU during the demo with the page open
in a browser against the same demo without it, side by side in one run.

    python -m bench web_cpu [--runs 2] [--port 8099] [--screenshot FILE]
                                                            (root, Mininet: the demo)

Each run starts ``python -m mininet_topos demo`` (variants alternate: off, page, off,
page ...); the controller's PID comes from its state file and its user + system CPU is
read from /proc until it exits. With the page, headless Chromium (Debian's chromium,
driven by Playwright) keeps the page open from the moment the address is printed to the
end (``--screenshot``: the first page run's page is saved as a PNG while the demo's
traffic runs, the README's picture of the live view). Prints each run's controller CPU seconds and the median ratio page / off (the
target: <= 1.10). Not part of ``python -m bench``'s default set (several minutes).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]


def _cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _watch_controller(state: Path, done: threading.Event, out: dict[str, float]) -> None:
    """The controller's CPU seconds, sampled until it exits (the last sample counts)."""
    pid = None
    while not done.is_set() and pid is None:
        try:
            pid = int(json.loads(state.read_text())["pid"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.2)
    while pid is not None:
        cpu = _cpu_s(pid)
        if cpu is None:
            break
        out["cpu_s"] = cpu
        time.sleep(0.2)


def run_demo(out: Path, web: str | None, screenshot: Path | None = None) -> float:
    argv = [sys.executable, "-m", "mininet_topos", "demo", "--out", str(out)]
    if web:
        argv += ["--web", web]
    done, got = threading.Event(), dict[str, float]()
    watcher = threading.Thread(target=_watch_controller, daemon=True,
                               args=(out / "logs" / "controller" / "controller_state.json", done, got))
    watcher.start()
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    browser = None
    lines: list[str] = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if web and browser is None and "live view at " in line:
                browser = _open_page(line.split("live view at ", 1)[1].strip(), screenshot)
        rc = proc.wait()
    finally:
        done.set()
        if browser is not None:
            browser()
    watcher.join(timeout=10)
    if web and LOADED.get(f"http://{web}/") != "ok":
        raise SystemExit(f"the page never loaded ({LOADED.get(f'http://{web}/', 'not opened')}): "
                         "this run measured nothing")
    if rc != 0:
        raise SystemExit(f"demo exited {rc}; its last lines:\n" + "".join(lines[-25:]))
    return got.get("cpu_s", float("nan"))


LOADED: dict[str, str] = {}   # url -> "ok" or the error: a run whose page never loaded
                              # measures nothing and is refused


SCREENSHOT_FLOWS = 2
SCREENSHOT_SETTLE_S = 4.0
"""The screenshot is of the page while it is live and lists this many flows, up to this
long after it first did (the demo's collective then runs: links carry traffic, the
flows have their INT paths, the heat map has a few columns).  Chromium may take over
10 s to start on a loaded host, and the demo's traffic may end seconds after the flows
appear, so the picture is retaken every second while the page stays live and the last
live one is kept (a single shot a fixed time after could show "controller stopped")."""


def _shoot_when_live(pg, path: Path, stop: threading.Event) -> None:  # type: ignore[no-untyped-def]
    first: float | None = None
    while not stop.wait(0.5 if first is None else 1.0):
        live = pg.evaluate("document.getElementById('status').dataset.state") == "live"
        flows = pg.evaluate("document.querySelectorAll('#flows tbody tr').length")
        if not live or flows < SCREENSHOT_FLOWS:
            if first is not None:
                return   # the traffic ended: the last live picture stays
            continue
        if first is None:
            first = time.monotonic()
            pg.set_viewport_size({"width": 1400, "height": 1000})
        pg.screenshot(path=str(path), full_page=True)
        if time.monotonic() - first >= SCREENSHOT_SETTLE_S:
            return


def _open_page(url: str, screenshot: Path | None = None):  # type: ignore[no-untyped-def]
    """Headless Chromium on ``url`` in a thread; returns the function that closes it."""
    from playwright.sync_api import sync_playwright
    stop = threading.Event()

    def keep_open() -> None:
        profile = tempfile.mkdtemp(prefix="bench-web-")
        with sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium",
                                                        headless=True, args=CHROMIUM_FLAGS)
            try:
                pg = ctx.new_page()
                pg.goto(url)
                pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
                LOADED[url] = "ok"
                if screenshot is not None:
                    _shoot_when_live(pg, screenshot, stop)
            except Exception as exc:  # noqa: BLE001 - reported as the run's failure
                LOADED[url] = str(exc).splitlines()[0]
            stop.wait()
            ctx.close()

    t = threading.Thread(target=keep_open, daemon=True)
    t.start()

    def close() -> None:
        stop.set()
        t.join(timeout=20)
    return close


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench web_cpu", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2, help="runs of each variant (default 2)")
    ap.add_argument("--port", type=int, default=8099, help="the page's loopback port")
    ap.add_argument("--screenshot", type=Path, default=None,
                    help="save the first page run's page as this PNG while the demo's traffic "
                         "runs (once the page lists its flows)")
    args = ap.parse_args(argv)
    if os.geteuid() != 0:
        print("web_cpu: needs root (the demo makes namespaces)", file=sys.stderr)
        return 1
    cpu: dict[str, list[float]] = {"off": [], "page": []}
    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        for i in range(args.runs):
            for variant in ("off", "page"):
                web = f"127.0.0.1:{args.port}" if variant == "page" else None
                shot = args.screenshot if variant == "page" and i == 0 else None
                c = run_demo(Path(tmp) / f"{variant}{i}", web, shot)
                cpu[variant].append(c)
                print(f"run {i + 1} {variant:>4}: controller CPU {c:6.2f} s", flush=True)
    ratios = [p / o for p, o in zip(cpu["page"], cpu["off"], strict=True)]
    print(f"controller CPU with the page open / without: median {statistics.median(ratios):.3f} "
          f"(runs {', '.join(f'{r:.3f}' for r in ratios)}; target <= 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
