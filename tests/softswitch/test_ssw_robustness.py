"""Malformed input never breaks the switch: random frames through every example program
and the conformance programs end as outputs or drops, never as Python exceptions."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from ssw_helpers import EXAMPLES, ROOT, load

PROGRAMS = sorted(EXAMPLES.glob("*.p4")) + sorted((ROOT / "tests" / "conformance").glob("*.p4"))


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
def test_random_frames(path: Path):
    sw = load(path)
    rng = random.Random(path.stem)
    for n in range(150):
        size = rng.choice([0, 1, 5, 13, 14, 20, 33, 34, 40, 60, 90])
        data = bytes(rng.randrange(256) for _ in range(size))
        if size >= 14 and n % 2:  # steer half of them into the programs' parsers
            data = data[:12] + rng.choice([b"\x08\x00", b"\x12\x34", b"\x88\xb5"]) + data[14:]
        outs, _events = sw.process_packet(rng.randrange(8), data, trace=n % 10 == 0)
        for o in outs:
            assert 0 <= o.port < sw.v1.drop_port and isinstance(o.data, bytes)
