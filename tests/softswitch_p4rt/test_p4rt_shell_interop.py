"""Interoperability: p4runtime-shell (an independent client) drives the softswitch server:
sets the pipeline from a P4Info file and the .p4 file, inserts/reads/modifies/deletes
entries, receives a packet-in and sends a packet-out."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from p4rt_helpers import PROGRAM

from softswitch.p4info import write_p4info

pytest.importorskip("p4runtime_sh", reason="needs p4runtime-shell (pip package p4runtime-shell)")

SESSION = Path(__file__).resolve().parent / "p4rt_shell_session.py"


def test_p4runtime_shell_session(server, device, p4info, tmp_path):
    info_path = tmp_path / "p4info.txt"
    write_p4info(p4info, str(info_path))
    proc = subprocess.Popen([sys.executable, str(SESSION), server.address, str(info_path), str(PROGRAM)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    steps: dict[str, dict] = {}
    try:
        assert proc.stdout is not None and proc.stdin is not None
        for line in proc.stdout:
            rec = json.loads(line)
            steps[rec["step"]] = rec
            if rec["step"] == "ready":
                frame = bytes.fromhex("0000000000bb" "000000000001" "0800") + bytes(20)
                assert device.inject(12, frame) == []
                proc.stdin.write("go\n")
                proc.stdin.flush()
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert steps["insert"]["entries"] == [[0xAA, "MyIngress.set_port", 2]]
    assert steps["modify"]["entries"] == [[0xAA, "MyIngress.set_port", 3]]
    assert steps["delete"]["entries"] == []
    assert (steps["other tables"]["acl"], steps["other tables"]["routes"]) == (1, 1)
    assert steps["more entities"] == {"step": "more entities", "groups": [[[1, 1], [2, 1]]], "counters": 64,
                                      "ecmp": [3], "members": [1]}
    assert steps["packet_in"]["packets"] == [{
        "payload": ("0000000000bb" "000000000001" "0800") + "00" * 20,
        "metadata": {"1": "0c", "2": "00"}}]
    deadline = time.monotonic() + 5
    while not device.transmitted and time.monotonic() < deadline:
        time.sleep(0.01)
    assert list(device.transmitted) == [(6, bytes.fromhex("0000000000cc0000000000010800"))]
