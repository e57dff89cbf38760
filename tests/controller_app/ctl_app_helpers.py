"""Helpers and fixtures: softswitch P4Runtime servers (LocalDevice) for every switch of a topology
file, the topology rewritten with their free 127.0.0.1 ports, and a CLI runner."""
from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
TOPOFILES = ROOT / "mininet_topos" / "topofiles"


@dataclass
class SwitchBed:
    """Servers keyed by switch name; `topology` is the rewritten topology file."""

    topology: Path
    addresses: dict[str, str]
    device_ids: dict[str, int]
    handles: dict[str, object] = field(default_factory=dict)
    devices: dict[str, object] = field(default_factory=dict)

    def start(self, name: str) -> None:
        from softswitch.p4runtime import serve
        from softswitch.targets.python.local_device import LocalDevice
        dev = LocalDevice(device_id=self.device_ids[name])
        self.handles[name] = serve(dev, self.addresses[name])
        self.devices[name] = dev

    def stop(self, name: str) -> None:
        h = self.handles.pop(name, None)
        if h is not None:
            h.stop(grace_s=0)  # type: ignore[attr-defined]

    def restart(self, name: str) -> None:
        self.stop(name)
        self.start(name)

    def close(self) -> None:
        for n in list(self.handles):
            self.stop(n)


def make_testbed(tmp_path: Path, topo_file: str = "dumbbell.yaml") -> SwitchBed:
    from softswitch.p4runtime import serve
    from softswitch.targets.python.local_device import LocalDevice
    data = yaml.safe_load((TOPOFILES / topo_file).read_text())
    tb = SwitchBed(topology=tmp_path / topo_file, addresses={}, device_ids={})
    for sw in data["switches"]:
        dev = LocalDevice(device_id=sw["device_id"])
        h = serve(dev, "127.0.0.1:0")
        tb.handles[sw["name"]] = h
        tb.devices[sw["name"]] = dev
        tb.addresses[sw["name"]] = sw["grpc_addr"] = h.address
        tb.device_ids[sw["name"]] = sw["device_id"]
    tb.topology.write_text(yaml.safe_dump(data, sort_keys=False))
    return tb


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[SwitchBed]:
    tb = make_testbed(tmp_path)
    try:
        yield tb
    finally:
        tb.close()


@pytest.fixture
def cli() -> Callable[..., subprocess.CompletedProcess[str]]:
    def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "controller", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout, check=False)
    return run

