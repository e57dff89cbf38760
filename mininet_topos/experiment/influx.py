"""Export a results folder to InfluxDB (or any server :mod:`controller.export` speaks).

Measurements: ``link_loss`` (the controller's schema: link x time bin), and
``testbed_queue`` (tags ``node``, ``ifname``; fields ``backlog_pkts``, ``backlog_bytes``,
``drops``) and ``testbed_run`` (one point: goodput, completion, lossy link), tagged with
the experiment name and variant.  Delivery goes through the controller's exporter
(batched, retried, spooled under ``<folder>/influx``).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from controller.export.line_protocol import format_line
from controller.export.runner import open_exporter
from controller.export.schema import link_loss_lines

from .errors import RunError
from .results import read_csv
from .spec import ExperimentSpec

__all__ = ["export_summary", "summary_lines"]


def summary_lines(folder: Path, spec: ExperimentSpec, t0_ns: int, *,
                  link_loss: bool = True) -> list[str]:
    """Line-protocol lines for one results folder (``link_loss`` False: leave out the
    loss bins, which a controller exporting live has already sent)."""
    lines: list[str] = []
    loss = read_csv(folder / "link_loss.csv") if link_loss else []
    if loss:
        names = sorted({r["link"] for r in loss})
        times = sorted({float(r["t_s"]) for r in loss})
        lost = np.zeros((len(names), len(times)), np.int64)
        deliv = np.zeros_like(lost)
        ni = {n: i for i, n in enumerate(names)}
        ti = {t: j for j, t in enumerate(times)}
        for r in loss:
            lost[ni[r["link"]], ti[float(r["t_s"])]] = int(r["lost"])
            deliv[ni[r["link"]], ti[float(r["t_s"])]] = int(r["delivered"])
        lines += link_loss_lines(links=names, lost=np.maximum(lost, 0), delivered=deliv,
                                 bin_time_ns=(t0_ns + np.array(times) * 1e9).astype(np.int64))
    tags = {"experiment": spec.name, "variant": spec.variant}
    for r in read_csv(folder / "queue.csv"):
        line = format_line("testbed_queue", {**tags, "node": r["node"], "ifname": r["ifname"]},
                           {"backlog_pkts": int(r["backlog_pkts"]),
                            "backlog_bytes": int(r["backlog_bytes"]), "drops": int(r["drops"])},
                           t0_ns + int(float(r["t_s"]) * 1e9))
        if line:
            lines.append(line)
    return lines


def export_summary(url: str, folder: Path, spec: ExperimentSpec, *,
                   link_loss: bool = True) -> int:
    """Send the folder's series to ``url``; returns the number of lines written."""
    import json

    summary = json.loads((folder / "summary.json").read_text())
    t0 = int(summary.get("t0_ns") or 0)
    lines = summary_lines(folder, spec, t0, link_loss=link_loss)
    ll = summary.get("lossy_link") or {}
    run = format_line("testbed_run", {"experiment": spec.name, "variant": spec.variant},
                      {"goodput_tx_bps": float(summary.get("goodput_tx_bps_total") or 0.0),
                       "completion_s": float(summary.get("completion_s_max") or 0.0),
                       "lossy_link": str(ll.get("link", "")),
                       "lossy_link_loss_rate": float(ll.get("loss_rate") or 0.0)}, t0)
    if run:
        lines.append(run)
    exp = open_exporter(url, out_dir=folder / "influx")
    try:
        exp.write(lines)
        if not exp.flush(timeout_s=15.0):
            raise RunError(f"InfluxDB {url}: not every line delivered in 15 s; the rest is "
                           f"spooled in {folder / 'influx' / 'spool'}")
    finally:
        exp.close()
    return len(lines)
