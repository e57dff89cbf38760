"""Helpers and fixtures: the INT program's pipeline (compiled once) and real P4Runtime servers
(softswitch's gRPC server with an in-process LocalDevice) on free 127.0.0.1 ports."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.p4rt import PipelineConfig, Schema, load_pipeline

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "p4" / "int_rocev2.p4"
TOPOFILES = ROOT / "mininet_topos" / "topofiles"


@pytest.fixture(scope="session")
def pipeline() -> PipelineConfig:
    return load_pipeline(target="softswitch", program=PROGRAM)


@pytest.fixture(scope="session")
def schema(pipeline: PipelineConfig) -> Schema:
    return Schema.from_p4info(pipeline.p4info)


class Servers:
    """Starts softswitch P4Runtime servers; `restart` brings one back empty on its port."""

    def __init__(self) -> None:
        self.handles: dict[int, object] = {}
        self.devices: dict[int, object] = {}

    def start(self, device_id: int, address: str = "127.0.0.1:0") -> str:
        from softswitch.p4runtime import serve
        from softswitch.targets.python.local_device import LocalDevice
        dev = LocalDevice(device_id=device_id)
        h = serve(dev, address)
        self.handles[device_id] = h
        self.devices[device_id] = dev
        return h.address  # type: ignore[no-any-return]

    def stop(self, device_id: int) -> None:
        h = self.handles.pop(device_id, None)
        if h is not None:
            h.stop(grace_s=0)  # type: ignore[attr-defined]

    def restart(self, device_id: int) -> str:
        addr = self.handles[device_id].address  # type: ignore[attr-defined]
        self.stop(device_id)
        return self.start(device_id, addr)

    def close(self) -> None:
        for d in list(self.handles):
            self.stop(d)


@pytest.fixture
def servers() -> Iterator[Servers]:
    s = Servers()
    try:
        yield s
    finally:
        s.close()

