"""The target option: softswitch gets the P4 source (an archive with MAIN), BMv2 the
p4c JSON with its P4Info file; bad files are named."""
from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

import pytest
from ctl_p4rt_helpers import PROGRAM
from google.protobuf import text_format

from controller.p4rt import PipelineConfig, PipelineError, Target, load_pipeline, read_p4info


def test_softswitch_config_is_the_source_archive(pipeline: PipelineConfig) -> None:
    assert pipeline.target is Target.SOFTSWITCH
    with tarfile.open(fileobj=io.BytesIO(pipeline.device_config)) as tf:
        names = tf.getnames()
        assert tf.extractfile("MAIN").read() == b"int_rocev2.p4"  # type: ignore[union-attr]
    assert "int_rocev2.p4" in names and "include/headers.p4" in names
    again = load_pipeline(target="softswitch", program=PROGRAM)
    assert again.cookie == pipeline.cookie and again.device_config == pipeline.device_config


def test_bmv2_config_is_the_json(pipeline: PipelineConfig, tmp_path: Path) -> None:
    info = tmp_path / "prog.p4info.txtpb"
    info.write_text(text_format.MessageToString(pipeline.p4info))
    js = tmp_path / "prog.json"
    js.write_text('{"program": "int_rocev2.p4", "__meta__": {"version": [2, 23]}}')
    cfg = load_pipeline(target="bmv2", bmv2_json=js, p4info=info)
    assert cfg.target is Target.BMV2 and cfg.device_config == js.read_bytes()
    assert cfg.p4info == pipeline.p4info
    binary = tmp_path / "prog.p4info.bin"
    binary.write_bytes(pipeline.p4info.SerializeToString())
    assert read_p4info(binary) == pipeline.p4info


@pytest.mark.parametrize("kw,message", [
    ({"target": "bmv2", "p4info": None, "bmv2_json": None}, "target bmv2: give the p4c JSON and the P4Info"),
    ({"target": "softswitch", "program": "nowhere/x.p4"}, "P4 program nowhere/x.p4: no such file"),
    ({"target": "bmv2", "p4info": "nowhere.txtpb", "bmv2_json": "nowhere.json"},
     "BMv2 JSON nowhere.json: cannot read"),
])
def test_pipeline_errors(kw: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(PipelineError, match=message):
        load_pipeline(**kw)


def test_bad_p4info_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txtpb"
    bad.write_text("tables { nonsense: 1 }")
    with pytest.raises(PipelineError, match=f"P4Info file {bad}: not a P4Info"):
        read_p4info(bad)


def test_bmv2_from_source_needs_p4c(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("p4c") or shutil.which("p4c-bm2-ss"):
        pytest.skip("p4c is installed here: the message for a missing p4c cannot be shown")
    with pytest.raises(PipelineError, match="target bmv2: p4c is not on PATH to compile .*int_rocev2.p4"):
        load_pipeline(target="bmv2", program=PROGRAM)
