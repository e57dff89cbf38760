"""The corpus of real samples (corpus/cases.csv): dumps written by real PyTorch and
NCCL log excerpts posted in public threads, each with its expected diagnosis.  Every
line is read or rejected (the table says how many rejected); flight-recorder hangs
(a missing rank, a rank stuck in another collective, a mismatched size or dtype)
name the culprit rank first, in the pickle and the JSON form."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from controller.diagnose import Evidence, diagnose
from controller.diagnose.library import read_library_logs
from controller.topology.model import Topology

ROOT = Path(__file__).resolve().parents[2]
CORPUS = Path(__file__).resolve().parent / "corpus"
NONE = Topology(name="none", switches=(), hosts=(), links=())
with (CORPUS / "cases.csv").open(newline="") as fh:
    CASES = list(csv.DictReader(fh))


def _runs() -> list[tuple[dict, str]]:
    out = []
    for row in CASES:
        for form in (("pickle", "json") if row["input"] == "fr" else ("text",)):
            out.append((row, form))
    return out


def _inputs(row: dict, form: str, tmp: Path) -> tuple[list[str], list[str]]:
    if row["input"] == "nccl":
        path, at, rank = row["files"].partition("@")
        return [str(CORPUS / path) + (f"@{rank}" if at else "")], []
    src = CORPUS / row["files"]
    files = sorted(p for p in src.iterdir()
                   if p.name.startswith("trace_rank_") and p.name.endswith(".json") == (form == "json"))
    assert len(files) >= 2, files
    return [], [str(f) for f in files]


@pytest.mark.parametrize(("row", "form"), _runs(),
                         ids=[f"{r['case']}-{f}" for r, f in _runs()])
def test_corpus_case(row: dict, form: str, tmp_path: Path) -> None:
    nccl, fr = _inputs(row, form, tmp_path)
    lib = read_library_logs(nccl, fr, rank_map=[row["rank_map"]] if row["rank_map"] else [])
    total = lib.total
    assert total.accounted == total.lines
    assert len(total.rejected) == int(row["rejected"]), total.rejected
    d = diagnose(Evidence(topo=NONE, records=total.records, events=total.events,
                          members=total.members, ranks_seen=total.ranks))
    assert d.fault == (row["fault"] == "true"), d.as_dict()
    if not d.fault:
        return
    want = {x.strip() for x in row["culprit"].split("|")}
    top = [(f"{c.type} {c.component}", c.kind) for c in d.culprits[: int(row["within"])]]
    assert any(name in want and kind == row["kind"] for name, kind in top), (top, d.as_dict())
    if row["input"] == "fr":   # the target: the culprit rank first, with nothing tied
        c0, *rest = d.culprits
        assert f"{c0.type} {c0.component}" in want
        assert all(c.confidence < c0.confidence for c in rest)


def test_fr_hang_culprit_first_in_every_fixture() -> None:
    """The target, counted: every flight-recorder hang of the corpus, both forms."""
    hangs = [(r, f) for r, f in _runs() if r["input"] == "fr" and r["fault"] == "true"]
    first = 0
    for row, form in hangs:
        _, fr = _inputs(row, form, Path())
        total = read_library_logs([], fr).total
        d = diagnose(Evidence(topo=NONE, records=total.records, members=total.members,
                              ranks_seen=total.ranks))
        first += f"{d.culprits[0].type} {d.culprits[0].component}" == row["culprit"]
    assert len(hangs) >= 18 and first == len(hangs)


def test_cli_on_a_real_dump_directory(tmp_path: Path) -> None:
    """The command as a user runs it on a directory of dumps: the account of every
    file on stderr and under "inputs", rank 2 first with the host the rank map gives."""
    r = subprocess.run(
        [sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path),
         "--flight-recorder", str(CORPUS / "fr" / "missing_rank"), "--rank-map",
         "0=n0,1=n1,2=n2,3=n3", "--json", "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    top = doc["culprits"][0]
    assert (top["component"], top["kind"], top["evidence"]["host"]) == (
        "2", "missing_collective", "n2")
    assert top["evidence"]["never_reached_seq"] == 4
    assert len(doc["inputs"]) == 8 and all(i["rejected"] == 0 for i in doc["inputs"])
    assert "trace_rank_2: 3 line(s)/entries: read 3" in r.stderr
    r = subprocess.run(
        [sys.executable, "-m", "controller", "diagnose", "--out", str(tmp_path),
         "--nccl", str(CORPUS / "nccl" / "nccl_1193_ray_prefixes.log"), "--no-plot"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 0 and "rejected 4 x rank unknown" in r.stderr
    assert "give --rank-map" in r.stderr and "nothing to diagnose" in r.stdout
