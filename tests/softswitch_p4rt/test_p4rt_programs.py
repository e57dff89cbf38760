"""Every program of the repository can be pushed over P4Runtime with the P4Info softswitch
builds for it, and every table of it answers a wildcard read and a default-entry read.
Programs that include project files go as a tar archive of their folder."""
from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest
from p4.v1 import p4runtime_pb2 as P

from softswitch.p4info import build_p4info
from softswitch.targets.python.switch import Switch

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = sorted((ROOT / "p4" / "examples").glob("*.p4")) + sorted((ROOT / "p4").glob("*.p4"))


def device_config(path: Path) -> bytes:
    """The .p4 file as text, or (when it includes other files) its folder's .p4 files as a tar."""
    source = path.read_bytes()
    if b'#include "' not in source:
        return source
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for f in sorted(path.parent.rglob("*.p4")):
            tf.add(f, arcname=str(f.relative_to(path.parent)))
        main = path.name.encode()
        ti = tarfile.TarInfo("MAIN")
        ti.size = len(main)
        tf.addfile(ti, io.BytesIO(main))
    return buf.getvalue()


@pytest.mark.parametrize("path", PROGRAMS, ids=[p.name for p in PROGRAMS])
def test_push_and_read_program(make_client, path: Path):
    info = build_p4info(Switch.from_file(path).program.checked)
    c = make_client(election_id=1)
    c.set_pipeline(info, device_config(path))
    assert all(e.table_entry.is_const for e in c.read("table_entry {}"))
    for t in info.tables:
        d = c.read(f"table_entry {{ table_id: {t.preamble.id} is_default_action: true }}")
        assert len(d) == 1 and d[0].table_entry.is_default_action
    got = c.stub.GetForwardingPipelineConfig(P.GetForwardingPipelineConfigRequest(device_id=1)).config
    assert got.p4info == info
