"""The same random entries and packets on both targets give identical outputs (ports
and bytes) and identical direct counters: the kernel program is the Python one."""
from __future__ import annotations

import random

import pytest
from ebpf_helpers import ROOT

from softswitch.api import Switch
from softswitch.tables import Lpm

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"


def _csum(hdr: bytes) -> int:
    s = sum(int.from_bytes(hdr[i:i + 2], "big") for i in range(0, len(hdr), 2))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def _packet(rng: random.Random, dsts: list[int]) -> bytes:
    eth = rng.randbytes(12)
    kind = rng.random()
    if kind < 0.1:
        return eth + rng.randbytes(2) + rng.randbytes(rng.randrange(0, 60))   # other protocols
    dst = rng.choice(dsts) if rng.random() < 0.8 else rng.getrandbits(32)
    ttl = rng.choice([0, 1, 2, 64, 255])
    ip = bytearray(bytes([0x45, rng.getrandbits(8)]) + (20 + 8).to_bytes(2, "big")
                   + rng.randbytes(4) + bytes([ttl, 17]) + b"\0\0"
                   + rng.getrandbits(32).to_bytes(4, "big") + dst.to_bytes(4, "big"))
    if rng.random() < 0.1:
        ip[0] = 0x46                       # ihl 6: checksum not verified
    ip[10:12] = _csum(bytes(ip)).to_bytes(2, "big")
    if rng.random() < 0.1:
        ip[10] ^= 0xFF                     # bad checksum
    frame = eth + b"\x08\x00" + bytes(ip) + rng.randbytes(8 + rng.randrange(0, 40))
    if rng.random() < 0.1:
        frame = frame[:rng.randrange(14, 34)]   # truncated inside the IPv4 header
    return frame


def test_random_entries_and_packets_give_identical_outputs_and_counters() -> None:
    rng = random.Random(14)
    py = Switch.from_file(PROGRAM)
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        routes = {}
        for _ in range(60):
            plen = rng.randrange(0, 33)
            value = rng.getrandbits(32) & (((1 << plen) - 1) << (32 - plen))
            routes[(value, plen)] = (rng.getrandbits(48), rng.randrange(0, 511))
        for sw in (py, kern):
            for (value, plen), (mac, port) in routes.items():
                sw.runtime.table_add("MyIngress.ipv4_lpm", [Lpm(value, plen)],
                                     "MyIngress.ipv4_forward", [mac, port])
            sw.runtime.table_set_default("MyIngress.ipv4_lpm", "NoAction")
        dsts = [v | rng.getrandbits(32 - p) if p < 32 else v for v, p in routes]
        forwarded = 0
        for i in range(2000):
            frame = _packet(rng, dsts)
            port = rng.randrange(0, 16)
            want = py.process(port, frame)
            got = kern.process(port, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            forwarded += bool(want)
        assert forwarded > 500
        # a route removed on both, then the counters of every remaining entry
        (value, plen) = next(iter(routes))
        for sw in (py, kern):
            sw.runtime.table_delete("MyIngress.ipv4_lpm", [Lpm(value, plen)])
        py_counts = {e.key: (e.packets, e.bytes) for e in py.runtime.table_entries("MyIngress.ipv4_lpm")}
        k_counts = {e.key: (e.packets, e.bytes) for e in kern.runtime.table_entries("MyIngress.ipv4_lpm")}
        assert k_counts == py_counts
        assert sum(p for p, _ in k_counts.values()) > 0
