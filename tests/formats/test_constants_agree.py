"""Each protocol constant is defined once per language: the P4 defines
(p4/include/defines.p4), the C header (ebpf/int_formats.h) and Python (formats/) must
say the same number, read from the files themselves."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from formats import agent_batch, int_md, roce, telemetry_report
from formats.int_md import (
    HPCC_DS_INSTRUCTION,
    HPCC_INSTRUCTION_BITMAP,
    HPCC_PORTS_INSTRUCTION_BITMAP,
)

ROOT = Path(__file__).resolve().parents[2]
P4_DEFINES = ROOT / "p4" / "include" / "defines.p4"
C_HEADER = ROOT / "ebpf" / "int_formats.h"
_DEFINE = re.compile(r"^\s*#define\s+([A-Z0-9_]+)\s+(0[xX][0-9a-fA-F]+|\d+)\b", re.MULTILINE)


def defines(path: Path) -> dict[str, int]:
    """Every ``#define NAME NUMBER`` of a file (the first one where #ifndef repeats it)."""
    out: dict[str, int] = {}
    for name, value in _DEFINE.findall(path.read_text()):
        out.setdefault(name, int(value, 0))
    return out


P4 = defines(P4_DEFINES)
C = defines(C_HEADER)

# (P4 name or None, C name or None, Python value)
SAME = [
    ("ROCEV2_UDP_PORT", "ROCEV2_UDP_PORT", roce.ROCEV2_UDP_PORT),
    ("INT_UDP_PORT", "INT_UDP_PORT", int_md.INT_UDP_PORT),
    ("INT_SHIM_TYPE_MD", "INT_SHIM_TYPE_MD", int_md.INT_SHIM_TYPE_MD),
    ("INT_SHIM_NPT_UDP", "INT_SHIM_NPT_UDP_PORT", int_md.INT_SHIM_NPT_UDP_PORT),
    ("INT_MD_VERSION", "INT_MD_VERSION", int_md.INT_MD_VERSION),
    ("INT_DS_ID_HPCC", "INT_DS_ID_HPCC", int_md.INT_DS_ID_HPCC),
    ("INT_SUPPORTED_INSTRUCTIONS", "INS_SUPPORTED", int_md.SUPPORTED_INSTRUCTIONS),
    ("INT_SUPPORTED_DS_INSTRUCTIONS", "DS_SUPPORTED", int_md.SUPPORTED_DS_INSTRUCTIONS),
    ("INT_FIXED_BYTES", None, int_md.INT_FIXED_LEN),
    (None, "INT_MAX_HOPS", int_md.MAX_HOPS),
    (None, "INT_SHIM_LEN", int_md.INT_SHIM_LEN),
    (None, "INT_MD_LEN", int_md.INT_MD_LEN),
    (None, "INS_NODE_ID", int_md.INS_NODE_ID),
    (None, "INS_PORTS", int_md.INS_PORTS),
    (None, "INS_HOP_LATENCY", int_md.INS_HOP_LATENCY),
    (None, "INS_QUEUE", int_md.INS_QUEUE),
    (None, "INS_INGRESS_TS", int_md.INS_INGRESS_TS),
    (None, "INS_EGRESS_TS", int_md.INS_EGRESS_TS),
    (None, "INS_TX_UTIL", int_md.INS_TX_UTIL),
    (None, "DS_TX_BYTES", int_md.DS_TX_BYTES),
    (None, "DS_QUEUE_BYTES", int_md.DS_QUEUE_BYTES),
    (None, "DS_LINE_RATE", int_md.DS_LINE_RATE),
    (None, "INT_HPCC_INSTRUCTIONS", HPCC_INSTRUCTION_BITMAP),
    (None, "INT_HPCC_PORTS_INSTRUCTIONS", HPCC_PORTS_INSTRUCTION_BITMAP),
    (None, "INT_HPCC_DS_INSTRUCTIONS", HPCC_DS_INSTRUCTION),
    ("REPORT_VERSION", None, telemetry_report.REPORT_VERSION),
    ("REPORT_TYPE_INT", None, telemetry_report.REP_TYPE_INT),
    ("REPORT_IN_TYPE_IPV4", None, telemetry_report.IN_TYPE_IPV4),
    ("REPORT_UDP_SRC_PORT", None, telemetry_report.REPORT_UDP_PORT),
]


@pytest.mark.parametrize("p4_name,c_name,value", SAME, ids=[s[0] or s[1] for s in SAME])
def test_p4_c_and_python_agree(p4_name: str | None, c_name: str | None, value: int) -> None:
    if p4_name is not None:
        assert P4.get(p4_name) == value, f"{P4_DEFINES.name}: {p4_name}={P4.get(p4_name)}"
    if c_name is not None:
        assert C.get(c_name) == value, f"{C_HEADER.name}: {c_name}={C.get(c_name)}"


def test_profiles_are_the_documented_bitmaps() -> None:
    assert (HPCC_INSTRUCTION_BITMAP, HPCC_PORTS_INSTRUCTION_BITMAP, HPCC_DS_INSTRUCTION) == (
        0x9400, 0xD400, 0xE000)


def test_ports_are_distinct() -> None:
    ports = {roce.ROCEV2_UDP_PORT, int_md.INT_UDP_PORT, telemetry_report.REPORT_UDP_PORT,
             agent_batch.AGENT_BATCH_UDP_PORT}
    assert len(ports) == 4
