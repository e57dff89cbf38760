"""Shared by the eBPF-target tests: the project's STF tests and which of them the
eBPF target runs today (the others must be refused with a location)."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INCLUDE = ROOT / "p4"

# every STF test of the project: (program, test)
ALL_STF = sorted([(p.with_suffix(".p4"), p) for p in (ROOT / "p4" / "examples").glob("*.stf")]
                 + [(p.with_suffix(".p4"), p) for p in (ROOT / "tests" / "conformance").glob("*.stf")])

# the ones the eBPF target runs; the rest need constructs it refuses (README: what is
# supported); a construct that starts to work moves its program here
RUNS_ON_EBPF = {"ipv4_forward", "ecn_marking", "firewall", "ecmp", "calc", "source_routing", "mirror", "multicast",
                "route_inspection", "h2_stack"}
