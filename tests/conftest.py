"""Test tiers: markers decide what a machine can run, and say why when it cannot.

CI runs as root on a machine with bcc and Mininet, so every tier runs there; on a
developer laptop without root the kernel tiers are skipped with the reason.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _missing(marker: str) -> str | None:
    """Why tests with ``marker`` cannot run here, or None when they can."""
    if marker == "root" and os.geteuid() != 0:
        return "needs root (network namespaces, raw sockets, tc)"
    if marker == "bpf":
        if os.geteuid() != 0:
            return "needs root to load eBPF programs"
        if importlib.util.find_spec("bcc") is None:
            return "needs bcc (Debian package python3-bpfcc)"
    if marker == "mininet" and importlib.util.find_spec("mininet") is None:
        return "needs Mininet (Debian package mininet)"
    if marker == "bmv2":
        if shutil.which("simple_switch_grpc") is None:
            return ("needs BMv2 simple_switch_grpc on PATH (scripts/install_p4_tools.sh installs "
                    "prebuilt BMv2 and p4c)")
        if shutil.which("p4c") is None and shutil.which("p4c-bm2-ss") is None:
            return "needs p4c (p4c or p4c-bm2-ss) on PATH to compile the programs for BMv2"
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        for marker in ("root", "bpf", "mininet", "bmv2"):
            if item.get_closest_marker(marker):
                reason = _missing(marker)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
                    break
