"""Differential test of sub-parsers on the eBPF target (program ``subparsers.p4``):
instances, one applied in a loop from another, a direct invocation, constructor
arguments (a constant, parser instances), a value set inside a sub-parser, ``out``/``inout`` headers, stacks and
scalars, aliased arguments, ``verify``, ``reject`` and a select matching no case
(``error.NoMatch``, which the eBPF target did not set before) inside a sub-parser. The same
random packets and value-set members on both targets give identical outputs, with
errors raised inside sub-parsers among them (what a sub-parser extracted before its
error stays; its ``out`` scalars are not copied back)."""
from __future__ import annotations

import random
from collections import Counter

import pytest
from ebpf_helpers import ROOT

from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "tests" / "softswitch_ebpf" / "subparsers.p4"
KINDS = "TopP.opt1.kinds"     # the value set of the sub-parser instance opt1


def _frame(rng: random.Random) -> bytes:
    eth = rng.randbytes(12) + (b"\x88\xb5" if rng.random() < 0.9 else b"\x08\x00")
    op = rng.choice([0xAA, 0x10, 0x20, 0xFF, rng.getrandbits(8)])
    first = rng.choice([2, 2, 2, 3, 4, 5, rng.getrandbits(8)])
    h1 = bytes([rng.choice([1] * 9 + [rng.getrandbits(8)]), op]) + rng.randbytes(5) + bytes([first])
    body = b""
    for _ in range(rng.randrange(0, 9)):
        kind = rng.choice(["h2", "h2", "h2", "h2", "h3", "opt"])
        if kind == "h2":
            body += bytes([rng.choice([2] * 8 + [rng.getrandbits(8)]), rng.getrandbits(8), rng.getrandbits(8),
                           rng.choice([2, 2, 2, 3, 4, 0xEE, 0, rng.getrandbits(8)])])
        elif kind == "h3":
            body += bytes([3, rng.choice([2, 3, 0, rng.getrandbits(8)])])   # 2, 3: a Wrap follows
        else:
            body += bytes([rng.choice([0xAA, op, 0xFF, 0x30, 0x31, rng.getrandbits(8)]), rng.getrandbits(8)])
    frame = eth + h1 + body + rng.randbytes(rng.randrange(0, 20))
    if rng.random() < 0.2:
        frame = frame[:rng.randrange(14, len(frame) + 1)]
    return frame


@pytest.mark.parametrize("hook", ["tc", "xdp"])
def test_subparsers_identical_on_both_targets(hook: str) -> None:
    rng = random.Random(3131)
    py = Switch.from_file(PROGRAM)
    errors: Counter[int] = Counter()
    counts: Counter[int] = Counter()
    with Switch.from_file(PROGRAM, target="ebpf", hook=hook) as kern:
        for i in range(3000):
            if i % 500 == 0:                 # new members of the sub-parser's value set
                members = rng.sample([0x30, 0x31, 0x10, 0xFF, rng.getrandbits(8)], rng.randrange(0, 4))
                for sw in (py, kern):
                    sw.runtime.value_set_clear(KINDS)
                    for v in members:
                        sw.runtime.value_set_add(KINDS, v)
            frame = _frame(rng)
            port = rng.randrange(0, 4)
            want, got = py.process(port, frame), kern.process(port, frame)
            assert got == want, f"packet {i} port {port}: {frame.hex()}\n python {want}\n ebpf   {got}"
            if want and want[0][1][12:14] == b"\x88\xb5" and len(want[0][1]) >= 22:
                out = want[0][1]
                errors[out[19]] += 1
                counts[out[16]] += 1
    # the packets reached every outcome: no error, too short, stack full, a failed
    # verify (inside the sub-parser too), no select case matched, and chains of up to
    # four h2 headers
    assert {0, 1, 2, 3, 4} <= set(errors), errors
    assert {0, 1, 2, 3, 4} <= set(counts), counts
