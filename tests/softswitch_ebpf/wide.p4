// Values of 65 to 128 bits (unsigned __int128 in the kernel program): header fields,
// locals, arithmetic, logic, comparisons, constant shifts, slices, concatenation,
// casts, slice stores and slices as inout arguments, exact and lpm table keys,
// for the differential test (test_ebpf_features.py).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header w_t { bit<128> a; bit<128> b; bit<96> c; }
header r_t {
    bit<128> sum;
    bit<128> diff;
    bit<128> logic;
    bit<128> shifted;
    bit<96>  mixed;
    bit<128> cat;
    bit<32>  low;
    bit<8>   flags;
    bit<8>   hit;
}
struct headers { ethernet_t eth; w_t w; r_t r; }
struct meta_t { bit<128> tmp; }

parser P(packet_in pkt, out headers h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) { 0x88b8: w; default: accept; }
    }
    state w {
        pkt.extract(h.w);
        transition select(h.w.a[127:64]) { 0xFFFFFFFFFFFFFFFF: reject; default: accept; }
    }
}

control NoVerify(inout headers h, inout meta_t m) { apply { } }

control I(inout headers h, inout meta_t m, inout standard_metadata_t sm) {
    action mark(bit<8> v) { h.r.hit = v; }
    action to_port(bit<9> p) { sm.egress_spec = p; }
    action twist(inout bit<68> v) { v = v ^ 68w0xF0000000000000001; }
    table by_a { key = { h.w.a: exact; } actions = { mark; NoAction; } default_action = NoAction; size = 256; }
    table by_b { key = { h.w.b: lpm; } actions = { to_port; NoAction; } default_action = to_port(1); size = 256; }
    apply {
        sm.egress_spec = 1;
        if (!h.w.isValid()) { exit; }
        h.r.setValid();
        h.r.sum = h.w.a + h.w.b;
        h.r.diff = h.w.a - h.w.b;
        h.r.logic = (h.w.a & ~h.w.b) ^ (h.w.a | 128w0xF0F0F0F0F0F0F0F0F0F0F0F0F0F0F0F0);
        m.tmp = h.w.a << 67;
        h.r.shifted = m.tmp | (h.w.b >> 70) | (h.w.a << 1) | (h.w.b >> 127);
        h.r.mixed = h.w.c + (bit<96>)h.w.a - (h.w.c |+| (bit<96>)h.w.b) + (h.w.c |-| 96w1);
        h.r.cat = h.w.a[63:0] ++ h.w.b[127:64];
        h.r.sum[127:60] = h.w.b[67:0];        // slice stores across the 64-bit halves
        twist(h.r.diff[100:33]);               // a slice as an inout argument
        h.r.low = (bit<32>)(h.w.a >> 90);
        h.r.flags = (bit<1>)(h.w.a < h.w.b) ++ (bit<1>)(h.w.a >= h.w.b)
                    ++ (bit<1>)(h.w.a == h.w.b) ++ (bit<1>)(h.w.c > 96w0x800000000000000000000000)
                    ++ (bit<1>)(-h.w.a == h.w.b) ++ 3w0;
        by_a.apply();
        by_b.apply();
    }
}

control E(inout headers h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers h) { apply { pkt.emit(h); } }

V1Switch(P(), NoVerify(), I(), E(), NoUpdate(), D()) main;
