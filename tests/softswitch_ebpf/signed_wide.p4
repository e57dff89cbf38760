// Signed values over 64 bits (int<72>, int<104>, int<128>: clang's __int128 on the
// eBPF target): add, subtract, saturating add and subtract, negation, arithmetic
// shift right by constants, comparisons, casts widening (sign-extending) and
// narrowing, a local with a negative initialiser; results written into the frame.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header in_t { int<72> a; int<72> b; int<128> c; int<104> d; bit<8> sel; }
header out_t {
    int<72> sum; int<72> diff; int<72> sat_add; int<72> sat_sub; int<128> c_shr;
    int<104> d_neg; bit<8> flags; int<72> from_d; bit<128> a_wide; int<128> c_sat;
    int<104> d_shr; int<72> k_sum;
}
struct headers { eth_t eth; in_t i; out_t o; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x88b8: parse_in;
            default: accept;
        }
    }
    state parse_in {
        pkt.extract(hdr.i);
        transition accept;
    }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (!hdr.i.isValid()) {
            return;
        }
        int<72> k = -5;
        hdr.o.setValid();
        hdr.o.sum = hdr.i.a + hdr.i.b;
        hdr.o.diff = hdr.i.a - hdr.i.b;
        hdr.o.sat_add = hdr.i.a |+| hdr.i.b;
        hdr.o.sat_sub = hdr.i.a |-| hdr.i.b;
        hdr.o.c_shr = hdr.i.c >> 67;
        hdr.o.d_neg = -hdr.i.d;
        hdr.o.flags = (bit<1>)(hdr.i.a < hdr.i.b) ++ (bit<1>)(hdr.i.a >= hdr.i.b)
                      ++ (bit<1>)(hdr.i.c > 0) ++ (bit<1>)(hdr.i.d <= -5)
                      ++ (bit<1>)(hdr.i.a == hdr.i.b) ++ (bit<1>)(hdr.i.c < (int<128>)hdr.i.d)
                      ++ (bit<1>)(hdr.i.a > k) ++ 1w0;
        hdr.o.from_d = (int<72>)hdr.i.d;
        hdr.o.a_wide = (bit<128>)(int<128>)hdr.i.a;
        hdr.o.c_sat = hdr.i.c |+| (int<128>)hdr.i.d;
        hdr.o.d_shr = hdr.i.d >> 200;
        hdr.o.k_sum = k + (hdr.i.sel == 1 ? hdr.i.a : hdr.i.b);
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.i);
        pkt.emit(hdr.o);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
