"""Run an STF test of packets and expectations on real BMv2, as p4c's own BMv2 test
runner does: compile with ``p4c-bm2-ss``, feed each port's packets from a pcap file
(``simple_switch --use-files``) and compare what the switch writes to each port's output
file with the expectations.  Only ``packet`` and ``expect`` lines (no table entries)."""
from __future__ import annotations

import logging
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

TOOLS = ("p4c-bm2-ss", "simple_switch")


def missing_tools() -> str | None:
    """Why BMv2 cannot run here, or None."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    return f"needs {' and '.join(absent)} on PATH (p4c and BMv2)" if absent else None


def _free_tcp_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _matches(pattern: str, got: bytes) -> bool:
    exact = pattern.endswith("$")
    pattern = pattern.rstrip("$").lower()
    have = got.hex()
    if len(have) < len(pattern) or (exact and len(have) != len(pattern)):
        return False
    return all(p in ("*", h) for p, h in zip(pattern, have))


def run_stf_on_bmv2(p4: Path, stf_text: str, workdir: Path, *, timeout: float = 30.0) -> list[str]:
    """Failures of the STF ``stf_text`` run on BMv2 with program ``p4`` (empty: it passed)."""
    from scapy.packet import Raw
    from scapy.utils import PcapWriter, rdpcap

    logging.getLogger("scapy.runtime").setLevel(logging.ERROR)  # raw frames, empty captures

    from softswitch.stf import parse_stf

    sent: dict[int, list[bytes]] = {}
    wanted: dict[int, list[tuple[int, str]]] = {}
    for cmd in parse_stf(stf_text, "case.stf"):
        if cmd.verb == "packet":
            sent.setdefault(int(cmd.args[0]), []).append(bytes.fromhex("".join(cmd.args[1:])))
        elif cmd.verb == "expect":
            wanted.setdefault(int(cmd.args[0]), []).append((cmd.line, "".join(cmd.args[1:])))
        else:
            raise ValueError(f"line {cmd.line}: only packet/expect lines run on BMv2 here: {cmd.text}")
    js = workdir / "prog.json"
    r = subprocess.run(["p4c-bm2-ss", "--arch", "v1model", "-o", str(js), str(p4)],
                       capture_output=True, text=True, timeout=300, check=False)
    if r.returncode != 0:
        return [f"p4c-bm2-ss rejected {p4.name}: {r.stderr.strip()[-2000:]}"]
    ports = sorted(set(sent) | set(wanted))
    for port in ports:
        w = PcapWriter(str(workdir / f"p{port}_in.pcap"), linktype=1, sync=True)
        w.write_header(None)
        for data in sent.get(port, []):
            w.write(Raw(data))
        w.close()
    argv = ["simple_switch", "--use-files", "0", "--thrift-port", str(_free_tcp_port()),
            "--notifications-addr", f"ipc://{workdir}/notifications.ipc"]
    for port in ports:
        argv += ["-i", f"{port}@{workdir}/p{port}"]
    got: dict[int, list[bytes]] = {}
    n_wanted = sum(len(v) for v in wanted.values())
    with open(workdir / "simple_switch.log", "w") as log:
        proc = subprocess.Popen(argv + [str(js)], stdout=log, stderr=subprocess.STDOUT,
                                env=dict(os.environ))
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and proc.poll() is None:
                got = {}
                for port in ports:
                    out = workdir / f"p{port}_out.pcap"
                    try:
                        got[port] = [bytes(p) for p in rdpcap(str(out))] if out.stat().st_size > 24 else []
                    except (OSError, EOFError, ValueError):
                        got[port] = []
                if sum(len(v) for v in got.values()) >= n_wanted:
                    break
                time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    failures = []
    for port, expectations in wanted.items():
        have = got.get(port, [])
        for i, (line, pattern) in enumerate(expectations):
            if i >= len(have):
                failures.append(f"line {line}: no packet {i + 1} on port {port} (expected {pattern})")
            elif not _matches(pattern, have[i]):
                failures.append(f"line {line}: port {port} packet {i + 1} is {have[i].hex()}, expected {pattern}")
    return failures
