"""The INT program (p4/int_rocev2.p4) on both targets with the entries the controller
computes for a leaf of the leaf-spine test bed (report-mode sinks, the collector on
one of its ports and a standby collector behind a spine: Telemetry Reports are I2E
clones, one per collector, each with its own sequence), written through the P4Runtime
entry path, and thousands of random frames: RoCEv2 from its hosts (INT source, local
sink with a report), RoCEv2 with INT and link sequence numbers from its spines (made
by Python switches upstream, then lost, reordered, cut short or corrupted), ARP, other
protocols. Outputs (ports, bytes, instance types, in order), every register and
counter and the loss digests must be identical.

Rule for what differs by nature: both targets run on one pinned clock (the Python
target's ``clock_us``, the kernel program's test clock), so timestamps, hop latencies
and the queue fields (unpaced ports: no queue) are equal and compared byte for byte;
the ECN ``random`` draw is never reached (no queue bytes without a queue)."""
from __future__ import annotations

import random
from typing import Any

import pytest
from ebpf_helpers import ROOT

from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "p4" / "int_rocev2.p4"
TOPO = ROOT / "mininet_topos" / "topofiles" / "leaf_spine.yaml"
UNDER_TEST = "s4"          # leaf: h3 on port 1, h4 (collector) on port 2, spines on 3 and 4


def _intent() -> dict[str, Any]:
    from controller.intent import CollectorSpec, IntentOptions, SinkMode, compute_intent
    from controller.topology import load_topology
    topo = load_topology(TOPO)
    return compute_intent(topo, IntentOptions(sink_mode=SinkMode.REPORT,
                                              collector=CollectorSpec(host="h4"),
                                              standby_collectors=(CollectorSpec(host="h1"),)))


def _program(sw: Any, desired: Any) -> None:
    """Write `desired` (the controller's DesiredState) as the controller does: table
    entries as P4Runtime protos through the server's entry path, clone sessions."""
    from p4.v1 import p4runtime_pb2 as P

    from controller.p4rt import Schema, entry_to_proto
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.device import Pipeline
    from softswitch.p4runtime.state import PipelineState
    from softswitch.p4runtime.table_entries import write_table_entry
    from softswitch.v1model import Replica
    p4info = build_p4info(sw.program.checked)
    st = PipelineState.create(Pipeline.create(sw, p4info))
    schema = Schema.from_p4info(p4info)
    for e in desired.entries:
        write_table_entry(st, P.Update.MODIFY if e.is_default else P.Update.INSERT,
                          entry_to_proto(schema, e))
    for cs in desired.clone_sessions:
        sw.runtime.clone_session_set(cs.session_id, [Replica(port=p, rid=r) for p, r in cs.replicas],
                                     truncate=cs.packet_length_bytes)


def _frames_from_spines(intent: dict[str, Any], rng: random.Random, n: int) -> list[tuple[int, bytes]]:
    """RoCEv2 with INT (two hop records) and link sequence numbers as s4 receives them on
    port 3 (from s1) or 4 (from s2): hosts of s3 through Python switches s3 -> spine."""
    from tests.helpers.p4int import roce_frame
    now = [1_000_000]
    sws = {name: Switch.from_file(PROGRAM, include_dirs=[str(ROOT / "p4")], clock_us=lambda: now[0])
           for name in ("s3", "s1", "s2")}
    for name, sw in sws.items():
        _program(sw, intent[name])
    s4_port = {"s1": 3, "s2": 4}
    out: list[tuple[int, bytes]] = []
    while len(out) < n:
        now[0] += rng.randrange(1, 50)
        src, sport = rng.choice([("10.0.1.1", 1), ("10.0.1.2", 2)])
        dst = rng.choice(["10.0.2.1", "10.0.2.2"])
        frame = roce_frame(src=src, dst=dst, sport=rng.randrange(0xC000, 0xC100), psn=rng.getrandbits(24),
                           payload=rng.randbytes(rng.randrange(0, 200)), tos=rng.choice([0, 1, 2, 3]) ,
                           eth_dst="02:00:00:00:00:03")
        for port, data in sws["s3"].process(sport, frame):
            spine = "s1" if port == 3 else "s2"
            for p2, d2 in sws[spine].process(1, data):
                if p2 == 2:
                    out.append((s4_port[spine], d2))
    return out


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    r = rng.random()
    if r < 0.08:
        return frame[:rng.randrange(14, len(frame))]                 # cut short
    if r < 0.16:
        b = bytearray(frame)
        i = rng.randrange(14, min(len(b), 120))
        b[i] ^= 1 << rng.randrange(8)                                 # one bit flipped (INT, IP, UDP)
        return bytes(b)
    return frame


def _other(rng: random.Random) -> bytes:
    """ARP for the switch's gateway or a host, IPv6, TCP/UDP that is not RoCEv2."""
    from scapy.layers.inet import IP, TCP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import ARP, Ether
    eth = Ether(src="00:00:0a:00:02:01", dst="02:00:00:00:00:04")
    kind = rng.randrange(5)
    if kind == 0:
        return bytes(Ether(src="00:00:0a:00:02:01", dst="ff:ff:ff:ff:ff:ff")
                     / ARP(op=1, psrc="10.0.2.1", pdst=rng.choice(["10.0.2.254", "10.0.2.2", "10.0.1.1"])))
    if kind == 1:
        return bytes(eth / IPv6() / UDP(dport=4791) / rng.randbytes(20))
    if kind == 2:
        return bytes(eth / IP(src="10.0.2.1", dst=rng.choice(["10.0.1.1", "10.0.2.2", "10.9.9.9"]),
                              ttl=rng.choice([0, 1, 64])) / TCP(dport=80) / rng.randbytes(30))
    if kind == 3:
        return bytes(eth / IP(src="10.0.2.1", dst="10.0.1.2") / UDP(dport=rng.choice([53, 7777, 4790]))
                     / rng.randbytes(rng.randrange(0, 80)))
    return bytes(eth)[:12] + rng.randbytes(2) + rng.randbytes(rng.randrange(0, 60))


def _from_hosts(rng: random.Random) -> tuple[int, bytes]:
    from tests.helpers.p4int import roce_frame
    port, src, mac = rng.choice([(1, "10.0.2.1", "00:00:0a:00:02:01"), (2, "10.0.2.2", "00:00:0a:00:02:02")])
    dst = rng.choice(["10.0.1.1", "10.0.1.2", "10.0.2.1", "10.0.2.2"])
    frame = roce_frame(src=src, dst=dst, sport=rng.randrange(0xC000, 0xC100), psn=rng.getrandbits(24),
                       payload=rng.randbytes(rng.randrange(0, 300)), tos=rng.choice([0, 1, 2, 3]),
                       eth_src=mac, eth_dst="02:00:00:00:00:04", ttl=rng.choice([1, 64, 64, 64]))
    return port, frame


def _state(sw: Any) -> dict[str, Any]:
    regs = {n: list(sw.runtime.register(n).cells) for n in sw.program.registers}
    ctrs = {n: (list(sw.runtime.counter(n).packets), list(sw.runtime.counter(n).bytes))
            for n in sw.program.counters}
    return {"registers": regs, "counters": ctrs}


def test_int_program_identical_on_both_targets() -> None:
    rng = random.Random(2014)
    intent = _intent()
    spine_frames = _frames_from_spines(intent, rng, 1200)
    # links lose and reorder frames: the link sequence numbers see gaps and late frames
    for _ in range(60):
        i = rng.randrange(len(spine_frames) - 1)
        spine_frames[i], spine_frames[i + 1] = spine_frames[i + 1], spine_frames[i]
    spine_frames = [f for f in spine_frames if rng.random() > 0.03]
    now = [5_000_000]
    py = Switch.from_file(PROGRAM, include_dirs=[str(ROOT / "p4")], clock_us=lambda: now[0])
    with Switch.from_file(PROGRAM, include_dirs=[str(ROOT / "p4")], target="ebpf") as kern:
        for sw in (py, kern):
            _program(sw, intent[UNDER_TEST])
        kinds = {"report": 0, "fabric": 0, "host": 0, "drop": 0}
        digests_py: list[Any] = []
        digests_k: list[Any] = []
        spine_iter = iter(spine_frames)
        for i in range(3000):
            r = rng.random()
            if r < 0.45:
                nxt = next(spine_iter, None)
                port, frame = nxt if nxt is not None else _from_hosts(rng)
            elif r < 0.85:
                port, frame = _from_hosts(rng)
            else:
                port, frame = rng.choice([1, 2, 3, 4]), _other(rng)
            frame = _mutate(rng, frame)
            now[0] += rng.randrange(1, 2000)
            kern.kernel.set_test_clock(now[0] * 1000)
            want, _ = py.process_packet(port, frame)
            got, _ = kern.process_packet(port, frame)
            assert [(o.port, o.data.hex(), o.instance_type) for o in got] == \
                [(o.port, o.data.hex(), o.instance_type) for o in want], \
                f"frame {i} on port {port}: {frame.hex()}"
            for o in want:
                kinds["report" if o.instance_type else "fabric" if o.port in (3, 4) else "host"] += 1
            kinds["drop"] += not want
            digests_py += py.runtime.digest_pop("link_loss_digest_t")
            digests_k += kern.runtime.digest_pop("link_loss_digest_t")
        assert min(kinds.values()) > 100, kinds
        assert digests_k == digests_py and digests_py
        state = _state(py)
        assert _state(kern) == state
        events, _ = state["counters"]["int_events"]
        drops, _ = state["counters"]["drop_reasons"]
        # INT source inserts, sink strips, reports sent, malformed INT seen; drops of many kinds
        assert events[1] and events[7] and events[9] and sum(events[12:17]), events
        assert sum(1 for d in drops if d) >= 4, drops
        assert kern.kernel.stats()["clone_lost"] == 0
        seq = next(v for k, v in state["registers"].items() if k.endswith("report_seq"))
        assert seq[1] == seq[2] == events[9] // 2 > 0 and not any(seq[3:]), seq
