// Header fields wider than 128 bits (no C integer holds them: the eBPF target keeps
// their bytes): one byte-aligned (bit<336>, as p4c's issue1879 sample), one at a bit
// offset of 4 (bit<250>); extracted, emitted, copied with their header, compared
// with it (==), and their headers' other fields changed around them.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header p_t { bit<336> pre; }
header w_t { bit<4> a; bit<250> big; bit<2> c; }
struct headers { eth_t eth; p_t p; w_t w1; w_t w2; }
struct metadata { }

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x88b6: wide;
            default: accept;
        }
    }
    state wide {
        pkt.extract(hdr.p);
        pkt.extract(hdr.w1);
        transition select(hdr.w1.a) {
            1: second;
            default: accept;
        }
    }
    state second {
        pkt.extract(hdr.w2);
        transition accept;
    }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (hdr.w1.isValid() && hdr.w2.isValid()) {
            if (hdr.w1 == hdr.w2) {
                sm.egress_spec = 2;
                hdr.w1.c = 3;
            } else {
                hdr.w2 = hdr.w1;
                hdr.w2.a = 5;
            }
        } else if (hdr.w1.isValid() && hdr.w1.c == 1) {
            hdr.w2 = hdr.w1;
            hdr.w2.c = 0;
        } else if (hdr.w1.isValid() && hdr.w1.c == 2) {
            hdr.p.setInvalid();
        }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }
control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.p);
        pkt.emit(hdr.w1);
        pkt.emit(hdr.w2);
    }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
