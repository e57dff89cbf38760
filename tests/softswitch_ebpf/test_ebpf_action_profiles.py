"""Indirect tables on the eBPF target are the Python target's: action profile members,
selector groups (empty, one member, repeated members) picked by the hash of the
selector keys (crc16 and crc32, masked to the selector's width), a switch on the
action_run of a member, direct counters of indirect entries, and every change of
members, groups and entries through the runtime API and the real P4Runtime server."""
from __future__ import annotations

import random
from typing import Any

import pytest
from ebpf_helpers import ROOT

from softswitch.errors import RuntimeApiError, RuntimeErrorCode
from softswitch.tables import Exact, Ternary
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "tests" / "softswitch_ebpf" / "selector.p4"
SEL, PROF, SEL32 = "I.pick_sel", "I.marks", "I.pick32_sel"


def _frame(rng: random.Random) -> bytes:
    k = rng.randrange(0, 10)
    return (rng.randbytes(12) + b"\x88\xb5" + bytes([k]) + rng.randbytes(7) + bytes(5)
            + rng.randbytes(rng.randrange(0, 40)))


def _both(switches: tuple[Any, ...], call: str, *args: Any, **kw: Any) -> None:
    """The same runtime call on both targets: both do it, or both refuse it alike."""
    outcomes = []
    for sw in switches:
        try:
            getattr(sw.runtime, call)(*args, **kw)
            outcomes.append(None)
        except RuntimeApiError as exc:
            outcomes.append(exc.code)
    assert outcomes[0] == outcomes[1], f"{call}{args}{kw}: {outcomes}"


def _random_op(rng: random.Random, sws: tuple[Any, ...], entries: dict[int, tuple[str, int]]) -> None:
    py = sws[0].runtime
    op = rng.random()
    if op < 0.25:
        mid = rng.randrange(0, 12)
        if rng.random() < 0.2:
            args: tuple[Any, ...] = (SEL, mid, "I.drop", [])
        else:
            args = (SEL, mid, "I.to_port", [rng.randrange(0, 8), rng.getrandbits(8)])
        call = "action_profile_member_modify" if mid in py.action_profile(SEL).members else \
            "action_profile_member_add"
        _both(sws, call, *args)
    elif op < 0.5:
        gid = rng.randrange(1, 6)
        members = list(py.action_profile(SEL).members)
        ids = [rng.choice(members) for _ in range(rng.choice([0, 1, 2, 3, 5, 8]))] if members else []
        call = "action_profile_group_modify" if gid in py.action_profile(SEL).groups else \
            "action_profile_group_add"
        _both(sws, call, SEL, gid, ids)
    elif op < 0.75:
        k = rng.randrange(0, 8)
        prof = py.action_profile(SEL)
        use_group = rng.random() < 0.7 and prof.groups
        if not use_group and not prof.members:
            return
        ref = {"group": rng.choice(list(prof.groups))} if use_group else {"member": rng.choice(list(prof.members))}
        call = "table_modify_indirect" if k in entries else "table_add_indirect"
        _both(sws, call, "I.pick", [Exact(k)], **ref)
        entries[k] = next(iter(ref.items()))
    elif op < 0.85 and entries:
        k = rng.choice(list(entries))
        _both(sws, "table_delete", "I.pick", [Exact(k)])
        del entries[k]
    elif op < 0.95:                       # refused while used, else both delete
        prof = py.action_profile(SEL)
        if rng.random() < 0.5 and prof.members:
            _both(sws, "action_profile_member_delete", SEL, rng.choice(list(prof.members)))
        elif prof.groups:
            _both(sws, "action_profile_group_delete", SEL, rng.choice(list(prof.groups)))
    else:
        _both(sws, "action_profile_member_modify", PROF, 1, "I.tag", [rng.getrandbits(8)])


def test_random_members_groups_entries_and_packets_give_identical_outputs() -> None:
    rng = random.Random(1414)
    py = Switch.from_file(PROGRAM)
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        sws = (py, kern)
        for m in range(6):
            _both(sws, "action_profile_member_add", SEL, m, "I.to_port", [m + 1, 0x10 + m])
        _both(sws, "action_profile_group_add", SEL, 1, [0, 1, 2, 3])
        _both(sws, "action_profile_group_add", SEL, 2, [])
        _both(sws, "action_profile_group_add", SEL, 3, [4, 4, 5])
        entries: dict[int, tuple[str, int]] = {}
        for k, ref in ((1, {"group": 1}), (2, {"group": 2}), (3, {"group": 3}), (4, {"member": 5})):
            _both(sws, "table_add_indirect", "I.pick", [Exact(k)], **ref)
            entries[k] = next(iter(ref.items()))
        _both(sws, "action_profile_member_add", PROF, 1, "I.tag", [0x77])
        _both(sws, "action_profile_member_add", PROF, 2, "NoAction", [])
        _both(sws, "table_add_indirect", "I.mark", [Ternary(1, 1)], member=1, priority=2)
        _both(sws, "table_add_indirect", "I.mark", [Ternary(0, 0)], member=2, priority=1)
        for m in range(5):
            _both(sws, "action_profile_member_add", SEL32, m, "I.tag32", [0x30 + m])
        _both(sws, "action_profile_group_add", SEL32, 7, [0, 1, 2, 3, 4])
        for c in range(256):
            if c % 3 == 0:
                _both(sws, "table_add_indirect", "I.pick32", [Exact(c)], group=7)
        ports: set[int] = set()
        runs: set[bytes] = set()
        dropped = 0
        for i in range(3000):
            if rng.random() < 0.03:
                _random_op(rng, sws, entries)
            frame = _frame(rng)
            want, got = py.process(1, frame), kern.process(1, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            dropped += not want
            for port, out in want:
                ports.add(port)
                runs.add(out[25:27])     # action_run: 1111 a to_port member, 3333 none
        assert len(ports) >= 5 and runs == {b"\x11\x11", b"\x33\x33"} and dropped > 10, (ports, runs)
        counts = [{e.key: (e.packets, e.bytes) for e in sw.runtime.table_entries("I.pick")} for sw in sws]
        assert counts[0] == counts[1] and sum(p for p, _ in counts[0].values()) > 100


def test_a_group_larger_than_the_kernel_holds_is_refused_and_changes_nothing() -> None:
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        rt = kern.runtime
        rt.action_profile_member_add(SEL32, 0, "I.tag32", [1])
        with pytest.raises(RuntimeApiError, match="holds at most 16") as err:
            rt.action_profile_group_add(SEL32, 1, [0] * 17)
        assert err.value.code is RuntimeErrorCode.TABLE_FULL
        assert rt.action_profile(SEL32).groups == {}
        rt.action_profile_group_add(SEL32, 1, [0] * 16)


def test_p4runtime_profile_members_groups_and_indirect_entries_reach_the_kernel() -> None:
    from p4.v1 import p4runtime_pb2 as P

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.server import serve
    from softswitch.targets.ebpf.daemon import EbpfDevice

    info = build_p4info(load_program(PROGRAM))
    prof = next(p for p in info.action_profiles if p.preamble.name == SEL)
    table = next(t for t in info.tables if t.preamble.name == "I.pick")
    to_port = next(a for a in info.actions if a.preamble.name == "I.to_port")
    device = EbpfDevice(device_id=6, cpu_port=64, name="p4rt_profiles")
    server = serve(device, "127.0.0.1:0")
    try:
        with SwitchClient(name="p", address=server.address, device_id=6) as cl:
            cl.connect()
            cl.set_pipeline(info, PROGRAM.read_bytes())
            ups = []
            for mid in range(3):
                up = P.Update(type=P.Update.INSERT)
                m = up.entity.action_profile_member
                m.action_profile_id, m.member_id = prof.preamble.id, mid
                m.action.action_id = to_port.preamble.id
                for prm, value in zip(to_port.params, (bytes([0, mid + 2]), bytes([0x40 + mid]))):
                    pa = m.action.params.add()
                    pa.param_id, pa.value = prm.id, value
                ups.append(up)
            g = P.Update(type=P.Update.INSERT)
            grp = g.entity.action_profile_group
            grp.action_profile_id, grp.group_id, grp.max_size = prof.preamble.id, 9, 8
            for mid in range(3):
                grp.members.add(member_id=mid, weight=1)
            te = P.Update(type=P.Update.INSERT)
            e = te.entity.table_entry
            e.table_id = table.preamble.id
            mf = e.match.add()
            mf.field_id, mf.exact.value = table.match_fields[0].id, b"\x01"
            e.action.action_profile_group_id = 9
            cl.write(ups + [g, te])
            sw = device.pipeline.switch
            assert sw.target == "ebpf"
            py = Switch.from_file(PROGRAM)
            # the same state on the Python target, through its API
            for mid in range(3):
                py.runtime.action_profile_member_add(SEL, mid, "I.to_port", [mid + 2, 0x40 + mid])
            py.runtime.action_profile_group_add(SEL, 9, [0, 1, 2])
            py.runtime.table_add_indirect("I.pick", [Exact(1)], group=9)
            rng = random.Random(6)
            seen = set()
            for _ in range(60):
                frame = bytes(12) + b"\x88\xb5\x01" + rng.randbytes(7) + bytes(5)
                got = sw.process(1, frame)
                assert got == py.process(1, frame)
                seen.add(got[0][0])
            assert seen == {2, 3, 4}
            q = P.Entity()
            q.action_profile_group.action_profile_id = prof.preamble.id
            (read,) = cl.read([q])
            assert sorted(m.member_id for m in read.action_profile_group.members) == [0, 1, 2]
            # the entry's direct counter: a DirectCounterEntry write reaches the kernel's cell
            dc = P.Update(type=P.Update.MODIFY)
            dc.entity.direct_counter_entry.table_entry.CopyFrom(e)
            dc.entity.direct_counter_entry.table_entry.ClearField("action")
            dc.entity.direct_counter_entry.data.packet_count = 1000
            dc.entity.direct_counter_entry.data.byte_count = 50_000
            cl.write([dc])
            frame = bytes(12) + b"\x88\xb5\x01" + bytes(12)
            sw.process(1, frame)
            q = P.Entity()
            q.direct_counter_entry.table_entry.table_id = table.preamble.id
            (read,) = cl.read([q])
            assert (read.direct_counter_entry.data.packet_count,
                    read.direct_counter_entry.data.byte_count) == (1001, 50_000 + len(frame))
    finally:
        server.stop()
        if device.pipeline is not None:
            device.pipeline.switch.close()
