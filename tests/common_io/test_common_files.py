"""common.files: a JSON file other processes read is replaced in one rename."""
from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from common.files import write_json_atomic


def test_replaces_the_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "stats.json"
    write_json_atomic(path, {"a": 1})
    write_json_atomic(path, {"a": 2, "b": [1, 2]})
    assert json.loads(path.read_text()) == {"a": 2, "b": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["stats.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_value_json_cannot_write_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    write_json_atomic(path, {"ok": True})
    with pytest.raises(TypeError):
        write_json_atomic(path, {"bad": object()})
    assert json.loads(path.read_text()) == {"ok": True}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
    write_json_atomic(path, {"x": object()}, default=lambda o: "obj")
    assert json.loads(path.read_text()) == {"x": "obj"}
