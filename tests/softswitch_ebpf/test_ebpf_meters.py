"""Meters on the eBPF target are the Python target's: indexed packet and byte meters in
ingress and egress, a table's direct meter, unconfigured cells GREEN, out-of-range
indexes GREEN, configuration writes through the runtime API, the STF runner and the
real P4Runtime server.

Colours depend on time, so the differential test pins one clock for both targets (the
Python target's ``clock_us``, the kernel program's test clock) and moves it by steps
that make the Python target's float arithmetic exact (quarter seconds x whole rates);
the STF and P4Runtime tests use the real clock with rates of 0 or one unit per second
(far from a colour's threshold), so a burst's colours do not depend on how fast the
packets come."""
from __future__ import annotations

import random

import pytest
from ebpf_helpers import INCLUDE, ROOT

from softswitch.externs.stateful import Color, MeterConfig
from softswitch.stf import StfRunner, parse_stf
from softswitch.tables import Exact
from softswitch.targets.python.switch import Switch

pytestmark = [pytest.mark.bpf, pytest.mark.root]
PROGRAM = ROOT / "tests" / "softswitch_ebpf" / "meters.p4"
STF = ROOT / "tests" / "softswitch_ebpf" / "meters.stf"
FIELDS = ("idx", "key", "pcolor", "bcolor", "dcolor", "dmiss", "ecolor")


def _frame(rng: random.Random, idx: int, key: int) -> bytes:
    return rng.randbytes(12) + b"\x88\xb5" + bytes([idx, key, 9, 9, 9, 9, 9]) + rng.randbytes(rng.randrange(0, 90))


def _config(rng: random.Random) -> MeterConfig | None:
    if rng.random() < 0.15:
        return None
    cir = rng.choice([0, 1, 2, 4, 100, 1000])
    cburst = rng.choice([0, 1, 2, 3, 64, 150, 400])
    return MeterConfig(cir=cir, cburst=cburst, pir=cir + rng.choice([0, 1, 4, 200]),
                       pburst=cburst + rng.choice([0, 1, 2, 100, 300]))


def test_random_configs_packets_and_clock_steps_give_identical_colours() -> None:
    rng = random.Random(2698)
    now = [1]
    py = Switch.from_file(PROGRAM, clock_us=lambda: now[0])
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        keys = list(range(1, 9))
        for sw in (py, kern):
            for k in keys:
                sw.runtime.table_add("I.classify", [Exact(k)], "I.forward", [k % 4])
        colours: set[tuple[int, int]] = set()
        for i in range(1500):
            if rng.random() < 0.02:         # reconfigure a cell: its buckets start again
                name, size = rng.choice([("I.pkts", 8), ("I.octets", 8), ("E.out_pkts", 4)])
                index, cfg = rng.randrange(size), _config(rng)
                for sw in (py, kern):
                    sw.runtime.meter_set(name, index, cfg)
            if rng.random() < 0.02:
                k, cfg = rng.choice(keys), _config(rng)
                for sw in (py, kern):
                    sw.runtime.direct_meter_set("I.classify", [Exact(k)], cfg)
            now[0] += rng.choice([0, 0, 0, 250_000, 500_000, 1_000_000, 3_000_000])
            kern.kernel.set_test_clock(now[0] * 1000)
            frame = _frame(rng, rng.randrange(0, 10), rng.choice(keys + [0, 77]))
            want, got = py.process(1, frame), kern.process(1, frame)
            assert got == want, f"packet {i}: {frame.hex()}\n python {want}\n ebpf   {got}"
            out = want[0][1]
            colours.update(enumerate((out[16], out[17], out[18], out[20])))
        # every meter (packets, bytes, direct, egress) gave every colour
        assert colours == {(m, c) for m in range(4) for c in Color}
        # reads answer the configurations written, on both targets
        assert kern.runtime.meter_get("I.octets", 3) == py.runtime.meter_get("I.octets", 3)


def test_unconfigured_and_out_of_range_meters_mark_green() -> None:
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        rng = random.Random(1)
        for idx in (0, 7, 8, 255):
            for _ in range(3):
                (port, out), = kern.process(1, _frame(rng, idx, 0))
                assert port == 3 and out[16:21] == bytes([0, 0, 0, 1, 0])


def test_a_burst_is_coloured_in_order_and_reconfiguring_resets_the_buckets() -> None:
    """Bursts 1 and 2, rates 0 (no refill: the clock does not matter): GREEN, YELLOW,
    RED, RED; a new configuration fills the buckets again."""
    with Switch.from_file(PROGRAM, target="ebpf") as kern:
        rt = kern.runtime
        rt.meter_set("I.pkts", 2, MeterConfig(cir=0, cburst=1, pir=0, pburst=2))
        rt.table_add("I.classify", [Exact(5)], "I.forward", [2])
        rt.direct_meter_set("I.classify", [Exact(5)], MeterConfig(cir=0, cburst=2, pir=0, pburst=3))
        rng = random.Random(2)
        colours = [kern.process(1, _frame(rng, 2, 5))[0][1][16:19] for _ in range(4)]
        assert [c[0] for c in colours] == [Color.GREEN, Color.YELLOW, Color.RED, Color.RED]
        assert [c[2] for c in colours] == [Color.GREEN, Color.GREEN, Color.YELLOW, Color.RED]
        rt.meter_set("I.pkts", 2, MeterConfig(cir=0, cburst=1, pir=0, pburst=2))
        assert kern.process(1, _frame(rng, 2, 5))[0][1][16] == Color.GREEN
        # a deleted entry's cell is cleared: the same key inserted again is unconfigured
        rt.table_delete("I.classify", [Exact(5)])
        rt.table_add("I.classify", [Exact(5)], "I.forward", [2])
        assert [kern.process(1, _frame(rng, 0, 5))[0][1][18] for _ in range(4)] == [Color.GREEN] * 4


def test_meters_stf_passes_on_both_targets() -> None:
    for target in ("python", "ebpf"):
        sw = Switch.from_file(PROGRAM, include_dirs=[str(INCLUDE)], target=target)
        try:
            res = StfRunner(sw, strict=True).run(parse_stf(STF.read_text(), str(STF)), str(STF))
        finally:
            if target == "ebpf":
                sw.close()
        assert res.ok, f"{target}: " + "\n".join(res.failures)
        assert res.packets_checked >= 7


def test_p4runtime_meter_writes_reach_the_kernel() -> None:
    """MeterEntry, a TableEntry's meter_config and DirectMeterEntry through the real gRPC
    server of an eBPF device; the kernel program's colours follow, and reads answer."""
    from p4.v1 import p4runtime_pb2 as P

    from controller.p4rt.client import SwitchClient
    from softswitch.frontend.load import load_program
    from softswitch.p4info import build_p4info
    from softswitch.p4runtime.server import serve
    from softswitch.targets.ebpf.daemon import EbpfDevice

    info = build_p4info(load_program(PROGRAM))
    meter_id = {m.preamble.name: m.preamble.id for m in info.meters}
    table = next(t for t in info.tables if t.preamble.name == "I.classify")
    forward = next(a for a in info.actions if a.preamble.name == "I.forward")
    device = EbpfDevice(device_id=5, cpu_port=64, name="p4rt_meters")
    server = serve(device, "127.0.0.1:0")
    try:
        with SwitchClient(name="m", address=server.address, device_id=5) as cl:
            cl.connect()
            cl.set_pipeline(info, PROGRAM.read_bytes())

            def entry(te: P.TableEntry, key: int) -> None:
                te.table_id = table.preamble.id
                m = te.match.add()
                m.field_id, m.exact.value = table.match_fields[0].id, bytes([key])

            meter = P.Update(type=P.Update.MODIFY)
            me = meter.entity.meter_entry
            me.meter_id, me.index.index = meter_id["I.pkts"], 4
            me.config.cir, me.config.cburst, me.config.pir, me.config.pburst = 0, 1, 0, 2
            ins = P.Update(type=P.Update.INSERT)
            entry(ins.entity.table_entry, 9)
            act = ins.entity.table_entry.action.action
            act.action_id = forward.preamble.id
            p = act.params.add()
            p.param_id, p.value = forward.params[0].id, b"\x02"
            mc = ins.entity.table_entry.meter_config
            mc.cir, mc.cburst, mc.pir, mc.pburst = 0, 1, 0, 1
            cl.write([meter, ins])
            sw = device.pipeline.switch
            assert sw.target == "ebpf"
            rng = random.Random(3)
            colours = [sw.process(1, _frame(rng, 4, 9))[0][1][16:19] for _ in range(3)]
            assert [c[0] for c in colours] == [Color.GREEN, Color.YELLOW, Color.RED]
            assert [c[2] for c in colours] == [Color.GREEN, Color.RED, Color.RED]
            # a DirectMeterEntry write reconfigures the entry's cell (full buckets again)
            dm = P.Update(type=P.Update.MODIFY)
            entry(dm.entity.direct_meter_entry.table_entry, 9)
            c = dm.entity.direct_meter_entry.config
            c.cir, c.cburst, c.pir, c.pburst = 0, 2, 0, 2
            cl.write([dm])
            assert [sw.process(1, _frame(rng, 0, 9))[0][1][18] for _ in range(3)] == \
                [Color.GREEN, Color.GREEN, Color.RED]
            q = P.Entity()
            q.meter_entry.meter_id = meter_id["I.pkts"]
            q.meter_entry.index.index = 4
            (got,) = cl.read([q])
            assert (got.meter_entry.config.cburst, got.meter_entry.config.pburst) == (1, 2)
    finally:
        server.stop()
        if device.pipeline is not None:
            device.pipeline.switch.close()
