"""Parser value sets on the eBPF target are the Python target's: members with and
without masks, a set of a struct over two select keys, members cleared and refilled,
through the runtime API and a P4Runtime ValueSetEntry write."""
from __future__ import annotations

import random

import pytest
from ebpf_helpers import ROOT

from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "tests" / "softswitch_ebpf" / "value_sets.p4"


def _frame(rng: random.Random, etypes: list[int], pairs: list[int]) -> bytes:
    etype = rng.choice(etypes + [0x88B5, 0x0800, rng.getrandbits(16)])
    pair = rng.choice(pairs + [0x112222, rng.getrandbits(24)])
    return rng.randbytes(12) + etype.to_bytes(2, "big") + pair.to_bytes(3, "big") + b"\0" + rng.randbytes(8)


def test_random_members_and_packets_give_identical_outputs() -> None:
    rng = random.Random(7)
    py = Switch.from_file(PROGRAM)
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        etypes: list[int] = []
        pairs: list[int] = []
        paths: set[int] = set()
        for i in range(1200):
            if i % 150 == 0:            # new members: some masked, the set cleared first
                etypes = [rng.getrandbits(16) for _ in range(rng.randrange(0, 5))]
                pairs = [rng.getrandbits(24) for _ in range(rng.randrange(0, 9))]
                for sw in (py, kern):
                    sw.runtime.value_set_clear("P.etypes")
                    sw.runtime.value_set_clear("P.pairs")
                    for e in etypes:
                        sw.runtime.value_set_add("P.etypes", e)
                    for j, p in enumerate(pairs):
                        mask = 0xFFFF00 if j % 3 == 2 else None        # a wildcard on the low byte
                        sw.runtime.value_set_add("P.pairs", p, mask)
            frame = _frame(rng, etypes, pairs)
            want, got = py.process(2, frame), kern.process(2, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            if len(want[0][1]) >= 18 and want[0][1][6:12] != bytes(6):
                paths.add(want[0][1][17])
        assert paths == {1, 2, 3}


def test_p4runtime_value_set_entry_reaches_the_kernel() -> None:
    from p4.v1 import p4runtime_pb2 as P

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.server import serve
    from softswitch.targets.ebpf.daemon import EbpfDevice

    info = build_p4info(load_program(PROGRAM))
    vs = next(v for v in info.value_sets if v.preamble.name == "P.etypes")
    device = EbpfDevice(device_id=9, cpu_port=64, name="p4rt_value_sets")
    server = serve(device, "127.0.0.1:0")
    try:
        with SwitchClient(name="v", address=server.address, device_id=9) as cl:
            cl.connect()
            cl.set_pipeline(info, PROGRAM.read_bytes())
            frame = bytes(6) + b"\x02" * 6 + b"\x12\x34" + b"\x01\x00\x02\x00" + bytes(8)
            sw = device.pipeline.switch
            assert sw.process(2, frame)[0][1][6:12] == bytes(6)          # not in the set: no x
            up = P.Update(type=P.Update.MODIFY)
            vse = up.entity.value_set_entry
            vse.value_set_id = vs.preamble.id
            m = vse.members.add().match.add()
            m.field_id, m.exact.value = vs.match[0].id, b"\x12\x34"
            cl.write([up])
            (port, out), = sw.process(2, frame)
            assert (port, out[17]) == (1, 1)                                       # parsed x: path 1
    finally:
        server.stop()
        if device.pipeline is not None:
            device.pipeline.switch.close()
