"""v1model externs inside programs: counters, direct counters, meters, registers, digests,
random, log_msg, assert, truncate; and their runtime API."""
from __future__ import annotations

import pytest
from ssw_helpers import program

from softswitch.errors import RuntimeApiError
from softswitch.errors import RuntimeErrorCode as C
from softswitch.externs.stateful import Color, MeterConfig, MeterState, meter_execute
from softswitch.tables import Exact

DECLS = """
header h_t { bit<8> op; bit<8> idx; bit<8> color; bit<8> rnd; }
struct learn_t { bit<8> op; bit<8> idx; }
struct headers_t { h_t h; }
struct meta_t { }
"""
PARSER = "state start { pkt.extract(hdr.h); transition accept; }"
INGRESS = """
    counter(4, CounterType.packets_and_bytes) pkts;
    meter(4, MeterType.packets) rate;
    register<bit<8>>(4) last;
    direct_counter(CounterType.packets) hits;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { hdr.h.idx: exact; } actions = { fwd; NoAction; } counters = hits; }
    apply {
        sm.egress_spec = 1;
        t.apply();
        pkts.count((bit<32>) hdr.h.idx);
        bit<8> c;
        rate.execute_meter((bit<32>) hdr.h.idx, c);
        hdr.h.color = c;
        bit<8> prev;
        last.read(prev, (bit<32>) hdr.h.idx);
        last.write((bit<32>) hdr.h.idx, hdr.h.op);
        if (hdr.h.op == 1) { digest<learn_t>(1, { hdr.h.op, prev }); }
        if (hdr.h.op == 2) { random(hdr.h.rnd, 8w10, 8w12); }
        if (hdr.h.op == 3) { log_msg("op {} idx {}", { hdr.h.op, hdr.h.idx }); }
        if (hdr.h.op == 4) { assert(hdr.h.idx == 0); }
        if (hdr.h.op == 5) { truncate(2); }
    }
"""


@pytest.fixture()
def sw():
    now = [0]
    s = program(decls=DECLS, parser=PARSER, ingress=INGRESS, deparser="pkt.emit(hdr.h);",
                clock_us=lambda: now[0])
    s.now = now
    return s


def test_counters_registers_direct_counter(sw):
    rt = sw.runtime
    rt.table_add("Ing.t", [Exact(2)], "Ing.fwd", [3])
    for op in (7, 8, 9):
        sw.process(0, bytes([op, 2, 0, 0]))
    assert rt.counter_read("Ing.pkts", 2) == (3, 12)
    assert rt.direct_counter_read("Ing.t", [Exact(2)])[0] == 3
    assert rt.register_read("Ing.last", 2) == 9
    rt.register_write("last", 2, 0x44)
    out = sw.process(0, bytes([0, 2, 0, 0]))
    assert out == [(3, bytes([0, 2, 0, 0]))]
    assert rt.register_read("Ing.last", 2) == 0
    rt.counter_write("Ing.pkts", 2, 0, 0)
    assert rt.counter_read("Ing.pkts", 2) == (0, 0)


def test_runtime_errors_have_codes_and_names(sw):
    rt = sw.runtime
    for fn, code, text in [
        (lambda: rt.counter_read("Ing.pkts", 4), C.INDEX_OUT_OF_RANGE, "counter Ing.pkts: index 4 outside 0..3"),
        (lambda: rt.register_write("Ing.last", 0, 256), C.BAD_VALUE, "does not fit bit<8>"),
        (lambda: rt.table_add("Ing.nope", [1], "Ing.fwd", [1]), C.NOT_FOUND, "did you mean"),
        (lambda: rt.table_add("Ing.t", [1], "Ing.bogus", [1]), C.NOT_FOUND, "bogus"),
        (lambda: rt.meter_set("Ing.rate", 0, MeterConfig(cir=10, cburst=1, pir=5, pburst=1)),
         C.BAD_VALUE, "pir >= cir"),
        (lambda: rt.clone_session_delete(9), C.NOT_FOUND, "clone session 9"),
    ]:
        with pytest.raises(RuntimeApiError) as info:
            fn()
        assert info.value.code is code
        assert text in str(info.value)


def test_meter_two_rate_three_colour(sw):
    # 1 packet/s committed, 2 packets/s peak, bursts of 1 and 2 packets
    sw.runtime.meter_set("Ing.rate", 1, MeterConfig(cir=1, cburst=1, pir=2, pburst=2))
    colors = [sw.process(0, bytes([7, 1, 0, 0]))[0][1][2] for _ in range(3)]
    assert colors == [Color.GREEN, Color.YELLOW, Color.RED]
    sw.now[0] = 1_000_000  # one second later: buckets refilled
    assert sw.process(0, bytes([7, 1, 0, 0]))[0][1][2] == Color.GREEN
    # unconfigured meter cells mark green
    assert sw.process(0, bytes([7, 0, 0, 0]))[0][1][2] == Color.GREEN


def test_meter_function_directly():
    cfg = MeterConfig(cir=1000, cburst=100, pir=2000, pburst=200)
    st = MeterState()
    assert meter_execute(cfg, st, 100, 0) is Color.GREEN
    assert meter_execute(cfg, st, 100, 0) is Color.YELLOW
    assert meter_execute(cfg, st, 100, 0) is Color.RED


def test_digest_random_log_assert_truncate(sw):
    sw.process(0, bytes([1, 3, 0, 0]))
    assert sw.runtime.digest_pop("learn_t") == [(1, 0)]
    assert sw.runtime.digest_pop("learn_t") == []
    for _ in range(10):
        assert 10 <= sw.process(0, bytes([2, 0, 0, 0]))[0][1][3] <= 12
    outs, events = sw.process_packet(0, bytes([3, 2, 0, 0]), trace=True)
    assert [e.detail["message"] for e in events if e.kind == "log"] == ["op 3 idx 2"]
    outs, events = sw.process_packet(0, bytes([4, 1, 0, 0]), trace=True)
    assert outs == []
    assert any(e.kind == "drop" and "assert failed" in e.detail["reason"] for e in events)
    assert sw.process(0, bytes([5, 0, 0, 0])) == [(1, bytes([5, 0]))]


def test_verify_checksum_with_payload_assume_identity_and_random_hash():
    from softswitch.externs.hashes import csum16
    from softswitch.targets.python.switch import Switch
    text = """
    #include <core.p4>
    #include <v1model.p4>
    header h_t { bit<16> a; bit<16> ck; bit<16> ident; bit<16> rnd; bit<8> err; }
    struct headers_t { h_t h; }
    struct meta_t { }
    parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        state start { pkt.extract(hdr.h); transition accept; }
    }
    control VC(inout headers_t hdr, inout meta_t meta) {
        apply { verify_checksum_with_payload(true, { hdr.h.a }, hdr.h.ck, HashAlgorithm.csum16); }
    }
    control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
        apply {
            sm.egress_spec = 1;
            hdr.h.err = (bit<8>) sm.checksum_error;
            hash(hdr.h.ident, HashAlgorithm.identity, 16w0, { hdr.h.a }, 32w65536);
            hash(hdr.h.rnd, HashAlgorithm.random, 16w100, { hdr.h.a }, 32w10);
            assume(hdr.h.a != 0xFFFF);
        }
    }
    control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
    control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
    control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.h); } }
    V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
    """
    sw = Switch.from_source(text)
    payload = b"\x10\x20\x30"
    good = csum16(bytes.fromhex("1234") + payload)
    out = sw.process(0, bytes.fromhex("1234") + good.to_bytes(2, "big") + bytes(5) + payload)[0][1]
    assert out[8] == 0 and out[4:6] == bytes.fromhex("1234") and 100 <= int.from_bytes(out[6:8], "big") < 110
    out = sw.process(0, bytes.fromhex("1234") + bytes(7) + payload)[0][1]
    assert out[8] == 1
    outs, ev = sw.process_packet(0, bytes.fromhex("ffff") + bytes(7), trace=True)
    assert outs == [] and "assume failed" in next(e for e in ev if e.kind == "drop").detail["reason"]
