"""The same random entries and packets on both targets give identical outputs (ports
and bytes) and identical direct counters: the kernel program is the Python one."""
from __future__ import annotations

import random

import pytest
from ebpf_helpers import ROOT

from softswitch.errors import RuntimeApiError
from softswitch.tables import Lpm
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "examples" / "ipv4_forward.p4"


@pytest.fixture(params=["tc", "xdp"])
def hook(request: pytest.FixtureRequest) -> str:
    """Each test runs the program generated for both kernel hooks: one pipeline, each
    hook's packet primitives (backends/ebpf/hooks.py)."""
    return str(request.param)


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


def test_random_entries_and_packets_give_identical_outputs_and_counters(hook: str) -> None:
    rng = random.Random(14)
    py = Switch.from_file(PROGRAM)
    with Switch.from_file(PROGRAM, target="ebpf", hook=hook) as kern:
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


def _acl_packet(rng: random.Random, srcs: list[int], dsts: list[int]) -> bytes:
    eth = rng.randbytes(12) + rng.choice([b"\x08\x00", b"\x08\x00", b"\x81\x00", b"\x86\xdd"])
    proto = rng.choice([6, 17, 0x85, 1])
    src = rng.choice(srcs) if rng.random() < 0.7 else rng.getrandbits(32)
    dst = rng.choice(dsts) if rng.random() < 0.7 else rng.getrandbits(32)
    ip = (bytes([0x45, rng.getrandbits(8)]) + (28).to_bytes(2, "big") + rng.randbytes(4)
          + bytes([rng.choice([0, 1, 64]), proto]) + rng.randbytes(2)
          + src.to_bytes(4, "big") + dst.to_bytes(4, "big"))
    l4 = rng.getrandbits(16).to_bytes(2, "big") + rng.randrange(0, 2000).to_bytes(2, "big")
    frame = eth + ip + l4 + rng.randbytes(rng.randrange(0, 20))
    if rng.random() < 0.1:
        frame = frame[:rng.randrange(14, len(frame))]
    return frame


def test_ternary_range_optional_priorities_identical_on_both_targets(hook: str) -> None:
    from softswitch.tables import Exact, Optional, Range, Ternary
    rng = random.Random(1414)
    program = ROOT / "tests" / "softswitch_ebpf" / "acl.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        srcs, dsts, added = [], [], []
        for _ in range(120):
            smask = rng.choice([0, 0, 0xFF000000, rng.getrandbits(32)])
            dmask = rng.choice([0, 0xFFFFFF00, 0xFFFFFFFF, rng.getrandbits(32)])
            sval, dval = rng.getrandbits(32) & smask, rng.getrandbits(32) & dmask
            srcs.append(sval)
            dsts.append(dval)
            lo = rng.randrange(0, 2000)
            key = [Ternary(sval, smask), Ternary(dval, dmask), Range(lo, min(lo + rng.randrange(0, 1500), 0xFFFF)),
                   Optional(rng.choice([None, None, 6, 17, 0x85])), Exact(rng.randrange(0, 4))]
            act = rng.choice(["I.deny", "I.permit", "I.permit", "I.nop"])
            args = [rng.randrange(0, 511), rng.getrandbits(8)] if act == "I.permit" else []
            prio = rng.randrange(1, 40)
            try:
                py.runtime.table_add("I.acl", key, act, args, prio)
            except RuntimeApiError:           # a duplicate key: refused on both
                with pytest.raises(RuntimeApiError):
                    kern.runtime.table_add("I.acl", key, act, args, prio)
                continue
            kern.runtime.table_add("I.acl", key, act, args, prio)
            added.append((key, prio))
        for cls in range(0, 256, 3):
            for valid in (0, 1):
                for sw in (py, kern):
                    sw.runtime.table_add("I.by_class", [cls, valid], "I.set_mark", [cls * 7 + valid])
        for key, prio in added[:20]:               # deletes reorder the kernel's scan array
            for sw in (py, kern):
                sw.runtime.table_delete("I.acl", key, prio)
        for sw in (py, kern):
            sw.runtime.table_set_default("I.acl", "I.permit", [7, 3])
            for cls in range(0, 256, 5):
                sw.runtime.table_add("E.st.stamp", [cls], "E.st.set", [cls * 0x01010101])
            for cls in range(0, 256, 3):
                sw.runtime.table_add("E.st2.stamp", [cls], "E.st2.set", [cls * 0x0F0F0F0F])
        outs = 0
        for i in range(2000):
            frame = _acl_packet(rng, srcs, dsts)
            port = rng.randrange(0, 4)
            want, got = py.process(port, frame), kern.process(port, frame)
            assert got == want, f"packet {i} port {port}: {frame.hex()}\n python {want}\n ebpf   {got}"
            outs += bool(want)
        assert outs > 200
        py_counts = {(e.key, e.priority): (e.packets, e.bytes) for e in py.runtime.table_entries("I.acl")}
        k_counts = {(e.key, e.priority): (e.packets, e.bytes) for e in kern.runtime.table_entries("I.acl")}
        assert k_counts == py_counts and sum(p for p, _ in k_counts.values()) > 0
        for i in range(8):
            assert kern.runtime.counter_read("I.port_count", i) == py.runtime.counter_read("I.port_count", i)
            assert kern.runtime.register_read("I.last_dport", i) == py.runtime.register_read("I.last_dport", i)
        assert kern.runtime.counter_read("I.port_count", 5)[0] > 0
        for sw in (py, kern):                       # control-plane writes reach the kernel
            sw.runtime.register_write("I.last_dport", 1, 0xBEEF)
            sw.runtime.counter_write("I.port_count", 6, 10, 1000)
        frame = _acl_packet(rng, srcs, dsts)
        while len(frame) < 42 or frame[12:14] != b"\x08\x00" or frame[23] not in (6, 17):
            frame = _acl_packet(rng, srcs, dsts)
        assert kern.process(1, frame) == py.process(1, frame)
        assert kern.runtime.counter_read("I.port_count", 6) == py.runtime.counter_read("I.port_count", 6) \
            == (11, 1000 + len(frame))


def test_header_push_and_pop_identical_on_both_targets(hook: str) -> None:
    """Headers added (setValid) and removed (setInvalid), on IP and other frames and
    with payloads longer than the kernel's 64-byte move chunks: same bytes out."""
    rng = random.Random(99)
    program = ROOT / "tests" / "softswitch_ebpf" / "tunnel.p4"
    py = Switch.from_file(program)
    ip = bytes.fromhex("4500002100010000401163c90a0001010a000202")
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for i in range(600):
            inner = rng.choice([b"\x08\x00" + ip, b"\x86\xdd", b"\x12\x34"])
            body = (b"\x88\xb5" + rng.randbytes(4) + inner) if rng.random() < 0.5 else inner
            frame = rng.randbytes(12) + body + rng.randbytes(rng.choice([0, 1, 5, 63, 64, 65, 200, 1400]))
            if rng.random() < 0.1:
                frame = frame[:rng.randrange(14, len(frame) + 1)]
            port = rng.randrange(0, 6)
            want, got = py.process(port, frame), kern.process(port, frame)
            assert got == want, f"packet {i} port {port}: {frame.hex()}\n python {want}\n ebpf   {got}"


def test_hash_algorithms_identical_on_both_targets(hook: str) -> None:
    """crc16, crc32, identity, csum16 and xor16 of random fields (also field lists that
    end in a partial byte, a base and a modulus, a crc16 update_checksum)."""
    rng = random.Random(7)
    program = ROOT / "tests" / "softswitch_ebpf" / "hashes.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for i in range(300):
            frame = rng.randbytes(14 + 21 + rng.randrange(0, 10))
            want, got = py.process(0, frame), kern.process(0, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"


def test_parser_selects_verify_lookahead_identical_on_both_targets(hook: str) -> None:
    """Tuples with masks, ranges and don't-cares, verify(), lookahead of bits and of a
    header, frames cut anywhere (PacketTooShort): same bytes out on both targets."""
    rng = random.Random(4)
    program = ROOT / "tests" / "softswitch_ebpf" / "parse.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for i in range(1500):
            etype = rng.choice([b"\x08\x00", b"\x08\x42", b"\x88\xb5", b"\x12\x34"])
            first = rng.choice([0x1A, 0x25, 0x30, 0x40, 0x55, rng.getrandbits(8)])
            second = rng.choice([0, 1, 2, rng.getrandbits(8)])
            frame = rng.randbytes(12) + etype + bytes([first, second]) + rng.randbytes(rng.randrange(0, 12))
            frame = frame[:rng.randrange(14, len(frame) + 1)]
            want, got = py.process(0, frame), kern.process(0, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"


@pytest.mark.parametrize("name", ["source_routing", "route_inspection"])
def test_header_stacks_identical_on_both_targets(name: str, hook: str) -> None:
    """Stacks filled by a parser loop (up to and past their size: StackOutOfBounds),
    pop_front / push_front, emitted whole: same bytes out on both targets."""
    rng = random.Random(len(name))
    program = ROOT / "p4" / "examples" / f"{name}.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        if name == "route_inspection":
            for sw in (py, kern):
                sw.runtime.table_set_default("MyEgress.swtrace", "MyEgress.add_swtrace", [7])
                for p in range(3):
                    sw.runtime.table_add("MyIngress.port_forward", [p], "MyIngress.forward", [p + 1])
        outs = 0
        for i in range(800):
            hops = rng.randrange(0, 11)
            if name == "source_routing":
                stack = b"".join(((1 if j == hops - 1 else rng.choice([0, 0, 1])) << 15
                                  | rng.randrange(0, 4)).to_bytes(2, "big") for j in range(hops))
                frame = rng.randbytes(12) + b"\x12\x34" + stack + rng.randbytes(rng.randrange(0, 30))
            else:
                frame = rng.randbytes(12) + rng.choice([b"\x88\xb5", b"\x88\xb5", b"\x08\x00"]) \
                    + bytes([hops]) + rng.randbytes(8 * hops) + rng.randbytes(rng.randrange(0, 20))
            frame = frame[:rng.randrange(14, len(frame) + 1)] if rng.random() < 0.15 else frame
            port = rng.randrange(0, 4)
            want, got = py.process(port, frame), kern.process(port, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            outs += bool(want)
        assert outs > 100


def test_varbit_identical_on_both_targets(hook: str) -> None:
    """A varbit option of a run-time length (from a lookahead): extracted, emitted and
    removed; too long for its maximum, and cut short; a digest of each (the same tuples)."""
    rng = random.Random(11)
    program = ROOT / "tests" / "softswitch_ebpf" / "tlv.p4"
    py = Switch.from_file(program)
    sent = 0
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for i in range(600):
            n = rng.choice([0, 1, 2, 7, 31, 32, 33, 40, rng.randrange(0, 60)])
            opt = bytes([rng.choice([1, 2, 5]), n]) + rng.randbytes(n)
            frame = rng.randbytes(12) + rng.choice([b"\x88\xb6", b"\x88\xb6", b"\x08\x00"]) + opt \
                + rng.randbytes(rng.randrange(0, 70))
            frame = frame[:rng.randrange(14, len(frame) + 1)] if rng.random() < 0.2 else frame
            port = rng.randrange(0, 8)
            want, got = py.process(port, frame), kern.process(port, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            digests = py.runtime.digest_pop("opt_digest_t")
            assert kern.runtime.digest_pop("opt_digest_t") == digests, f"packet {i}"
            sent += len(digests)
        assert sent > 100


def test_truncate_identical_on_both_targets(hook: str) -> None:
    """truncate() from an ingress table action and from egress (which replaces
    ingress's length; egress truncate(0) keeps it), lengths shorter and longer than the
    frame, headers pushed before the cut: same bytes out on both targets."""
    rng = random.Random(272)
    program = ROOT / "tests" / "softswitch_ebpf" / "truncate.p4"
    py = Switch.from_file(program)
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for sw in (py, kern):
            for port, n in enumerate([14, 15, 18, 21, 60, 64, 65, 200, 9000]):
                sw.runtime.table_add("I.by_port", [port], "I.cut_to", [n, port + 1])
            sw.runtime.table_add("I.by_port", [9], "NoAction", [])
        cut = refused = 0
        for i in range(800):
            body = bytes([rng.choice([0, 1, 2, 3]), rng.randrange(0, 256)]) + rng.randbytes(2)
            frame = rng.randbytes(12) + rng.choice([b"\x88\xb6", b"\x88\xb6", b"\x08\x00"]) + body \
                + rng.randbytes(rng.choice([0, 1, 5, 40, 63, 64, 200, 1400]))
            frame = frame[:rng.randrange(14, len(frame) + 1)] if rng.random() < 0.1 else frame
            port = rng.randrange(0, 12)
            want, got = py.process(port, frame), kern.process(port, frame)
            pushed = frame[12:14] == b"\x88\xb6" and len(frame) >= 18 and frame[14] == 3
            if hook == "tc" and pushed and want and len(want[0][1]) < 14 + 4:
                # a cut inside the headers pushed in front of the network header (an XDP
                # frame has no network header offset: the cut is made there too)
                assert got == [], f"packet {i}"
                refused += 1
                continue
            assert got == want, f"packet {i} port {port}: {frame.hex()}\n python {want}\n ebpf   {got}"
            cut += bool(want) and len(want[0][1]) < len(frame)
        assert cut > 200
        assert kern.kernel.stats()["truncate_error"] == refused
        assert refused > 0 if hook == "tc" else refused == 0


def test_truncate_below_the_ethernet_header_is_a_counted_drop(hook: str) -> None:
    """The kernel keeps at least the 14-byte link-layer header of a frame: a shorter
    truncate() drops the packet and counts it (statistic truncate_error)."""
    program = ROOT / "tests" / "softswitch_ebpf" / "truncate.p4"
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        kern.runtime.table_add("I.by_port", [0], "I.cut_to", [5, 1])
        assert kern.process(0, bytes(12) + b"\x08\x00" + bytes(40)) == []
        assert kern.kernel.stats()["truncate_error"] == 1


def test_random_follows_the_python_targets_rule(hook: str) -> None:
    """random(): the same bytes as the Python target except the drawn values, which
    both keep inside [lo, hi] (lo when hi < lo); the kernel's draws vary."""
    rng = random.Random(402)
    program = ROOT / "tests" / "softswitch_ebpf" / "random.p4"
    py = Switch.from_file(program)
    drawn: set[int] = set()
    wide: set[int] = set()
    with Switch.from_file(program, target="ebpf", hook=hook) as kern:
        for i in range(300):
            lo, hi = rng.choice([(0, 0xFFFF), (10, 20), (5, 5), (30, 2), (0xFFFE, 0xFFFF)])
            frame = rng.randbytes(14) + lo.to_bytes(2, "big") + hi.to_bytes(2, "big") + bytes(14) \
                + rng.randbytes(rng.randrange(0, 20))
            [(pp, want)], [(kp, got)] = py.process(0, frame), kern.process(0, frame)
            assert kp == pp and len(got) == len(want)
            for out in (want, got):
                assert out[:18] == frame[:18] and out[32:] == frame[32:], f"packet {i}"
                v, empty, one = (int.from_bytes(out[k:k + 2], "big") for k in (18, 20, 22))
                assert (lo <= v <= hi) if hi >= lo else v == lo, f"packet {i}: {v} not in [{lo}, {hi}]"
                assert (empty, one) == (9, 77)
            if (lo, hi) == (0, 0xFFFF):
                drawn.add(int.from_bytes(got[18:20], "big"))
            wide.add(int.from_bytes(got[24:32], "big"))
        assert len(drawn) > 20 and len(wide) == 300
        assert max(wide) >> 32
