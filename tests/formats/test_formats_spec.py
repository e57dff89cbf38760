"""The formats specification is part of the project, and every place that cites it
cites it by its path (and, where it names a section, a section that exists)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SPEC = ROOT / "formats" / "FORMATS.md"


def _tracked_text_files() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines()
            if p.endswith((".py", ".md", ".p4", ".h", ".c")) and (ROOT / p).is_file()]


def test_spec_is_in_the_tree_with_the_project_extensions() -> None:
    text = SPEC.read_text()
    headings = set(re.findall(r"^#+ (.+?)(?: \*\(project extension\)\*)?$", text, re.MULTILINE))
    for section in ("RoCEv2 (what `traffic/` sends)", "ICRC", "SACK block", "FEC repair packet",
                    "INT profiles", "Telemetry Report v2.0 (sink switch -> collector)",
                    "Agent batch", "Rate and FEC feedback", "Confirmation record"):
        assert section in headings, section
    for fact in ("0xD400", "0xC0", "least significant byte first", "ID 0 with DF set"):
        assert fact in text, fact


def test_every_citation_names_the_spec_by_path_and_an_existing_section() -> None:
    headings = {h.strip() for h in re.findall(r"^#+ (.+)$", SPEC.read_text(), re.MULTILINE)}
    bare, missing = [], []
    for path in _tracked_text_files():
        if path in (SPEC, Path(__file__).resolve()):
            continue
        text = path.read_text(errors="replace")
        for m in re.finditer(r"(?<![\w/.])FORMATS\.md", text):
            bare.append(f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}")
        for m in re.finditer(r'formats/FORMATS\.md\s+"([^"]+)"', text):
            name = " ".join(m.group(1).split())
            if not any(h.startswith(name) for h in headings):
                missing.append(f"{path.relative_to(ROOT)}: section {name!r}")
    assert not bare, f"cite formats/FORMATS.md by its path: {bare}"
    assert not missing, missing
