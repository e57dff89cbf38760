"""The results folder of an experiment: JSON summary, CSV time series, PNG plots.

Layout (one folder per experiment, one sub-folder per sweep variant)::

    OUT/summary.json          every variant's summary side by side (``variants``)
    OUT/<variant>/summary.json
    OUT/<variant>/queue.csv    t_s,node,ifname,backlog_pkts,backlog_bytes,drops
    OUT/<variant>/port_rate.csv t_s,node,ifname,tx_bps
    OUT/<variant>/flow_rate.csv t_s,host,qpn,<traffic series columns>
    OUT/<variant>/link_loss.csv t_s,link,lost,delivered
    OUT/<variant>/fct.csv      host,qpn,peer,size,fct_s,retx_pkts
    OUT/<variant>/*.png        queue.png rates.png fct_cdf.png loss_heatmap.png
    OUT/<variant>/traffic/     each rank's own JSON summary
    OUT/<variant>/logs/        node samples, process logs

Why CSV and JSON: they open in anything (pandas, a spreadsheet, InfluxDB import) and
a summary written before the plots survives a plotting failure.
"""
from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import RunError

if TYPE_CHECKING:
    from .spec import ExperimentSpec

__all__ = ["ResultsDir", "RunResult", "to_jsonable"]


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types for numpy values and dataclass-like mappings; NaN becomes None."""
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        return to_jsonable(obj.item())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    return str(obj)


class ResultsDir:
    """Writes the files of one results folder; refuses a path that is a file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and not self.path.is_dir():
            raise RunError(f"results folder {self.path}: exists and is not a folder")
        self.path.mkdir(parents=True, exist_ok=True)

    def sub(self, name: str) -> ResultsDir:
        return ResultsDir(self.path / name)

    def file(self, name: str) -> Path:
        return self.path / name

    def write_json(self, name: str, obj: Any) -> Path:
        p = self.path / name
        p.write_text(json.dumps(to_jsonable(obj), indent=2, sort_keys=False) + "\n",
                     encoding="utf-8")
        return p

    def write_csv(self, name: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
        p = self.path / name
        with open(p, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            for row in rows:
                if len(row) != len(header):
                    raise RunError(f"{p}: row of {len(row)} values for {len(header)} columns "
                                   f"({', '.join(header)}): {list(row)!r}")
                w.writerow(["" if isinstance(v, float) and not math.isfinite(v) else v
                            for v in row])
        return p


def read_csv(path: str | Path) -> list[dict[str, str]]:
    """Rows of a CSV written by :meth:`ResultsDir.write_csv` as dicts (for plots/tests)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@dataclass(slots=True, kw_only=True)
class RunResult:
    """One spec's run: its results folder, summary, plots and summary lines."""

    spec: ExperimentSpec
    out: Path
    summary: dict[str, Any]
    plots: dict[str, Path]
    lines: list[str] = field(default_factory=list)
