"""The live view of a running controller in headless Chromium: real softswitch
processes in namespaces (h1 - s1 - s2 - h2), UDP traffic across the s1 -> s2 link, loss
injected on it with the eBPF loss emulator (at s1's egress: the switch reads its ports
with packet sockets, which see a frame before tc ingress could drop it); the page shows
the link red within 2 s of the injection, the link-loss alert fires, and both clear once
the loss stops."""
from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Self

import pytest

from tests.helpers.switch_pair import Bed
from tests.helpers.waiting import wait_for

from .browser import artifacts, page

pytestmark = [pytest.mark.root, pytest.mark.bpf, pytest.mark.slow, pytest.mark.browser]

LINK = "s1:2->s2:2"


@pytest.fixture
def bed(tmp_path: Path) -> Iterator[Bed]:
    b = Bed(tmp_path, prefix=f"twb{os.getpid() % 10000}")
    try:
        yield b
    finally:
        b.close()


class Sender:
    """UDP h1 -> h2 at ``pps`` until stopped (the link counters need packets to count)."""

    def __init__(self, bed: Bed, pps: int = 400) -> None:
        with bed.ns["h1"].enter():
            self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.pps, self.sent = pps, 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        period = 1.0 / self.pps
        nxt = time.monotonic()
        while not self.stop.is_set():
            self.sock.sendto(b"x" * 200, ("10.0.2.1", 9999))
            self.sent += 1
            nxt += period
            time.sleep(max(0.0, nxt - time.monotonic()))

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self.sock.close()


def test_live_page_turns_a_lossy_link_red_and_alerts(bed: Bed, tmp_path: Path) -> None:
    from controller.alerts import AlertRule, RuleKind
    from controller.p4rt import Phase
    from controller.runner import Controller, RunConfig
    from ebpf.loss import LossEmulator
    topo = bed.build()
    bed.start_switch("s1", 1)
    bed.start_switch("s2", 2)
    rule = AlertRule(name="link-loss", kind=RuleKind.LINK_LOSS, above=0.02, clear_s=1.0)
    cfg = RunConfig(topology=str(topo), out_dir=str(tmp_path / "out"), report_port=0, agent_port=0,
                    status_interval_s=0.25, loss_bin_s=0.5, connect_timeout_s=30,
                    alert_rules=(rule,), web=("127.0.0.1", 0))
    ctl = Controller(cfg=cfg).start()
    try:
        assert all(st.phase is Phase.READY for st in ctl.status.values()), \
            {n: st.error for n, st in ctl.status.items()}
        assert ctl.web is not None
        with Sender(bed) as tx, LossEmulator(bed.ports["s1"][2], netns=bed.ns["s1"].name,
                                                     direction="egress") as loss, \
                page() as pg:
            row = f"#links tr[data-link='{LINK}']"
            pg.goto(ctl.web.url)
            pg.wait_for_selector("body[data-ready='1']", timeout=30_000)
            # traffic crosses the link and it is not red
            assert wait_for(lambda: (ctl.latest or {}).get("lossmap", {}).get("recent_rate", [None])[0]
                            is not None, timeout_s=30), "no packets counted on the link"
            pg.wait_for_selector(f"{row}[data-health='green'], {row}[data-health='amber']",
                                 timeout=15_000)
            assert tx.sent > 0
            loss.set_bernoulli(0.2)
            t0 = time.monotonic()
            pg.wait_for_selector(f"{row}[data-health='red']", timeout=15_000)
            red_after_s = time.monotonic() - t0
            pg.wait_for_selector(f"#alerts tr[data-state='firing'][data-subject='{LINK}']",
                                 timeout=15_000)
            pg.screenshot(path=str(artifacts() / "live_lossy_link.png"), full_page=True)
            loss.disable()
            pg.wait_for_selector(f"#alerts tr[data-state='resolved'][data-subject='{LINK}']",
                                 timeout=20_000)
            pg.wait_for_selector(f"{row}:not([data-health='red'])", timeout=15_000)
            assert pg.locator("#status").get_attribute("data-state") == "live"
            assert pg.errors == []    # type: ignore[attr-defined]
        (artifacts() / "live_red_after_s.txt").write_text(f"{red_after_s:.3f}\n")
        assert red_after_s <= 2.0, f"the link turned red {red_after_s:.2f} s after the loss began"
        state = ctl.latest or {}
        assert state["alerts"]["fired_total"] >= 1
        assert any(a["subject"] == LINK and a["state"] == "resolved" for a in state["alerts"]["resolved"])
    finally:
        ctl.stop()
