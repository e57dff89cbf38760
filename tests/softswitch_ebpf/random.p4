// random(): a range from the frame, an empty range (hi < lo gives lo), a single value,
// the whole of bit<64>; written over the frame's bytes for the eBPF target's tests.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header r_t { bit<16> lo; bit<16> hi; bit<16> v; bit<16> empty; bit<16> one; bit<64> wide; }
struct headers { ethernet_t eth; r_t r; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.r); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        random(hdr.r.v, hdr.r.lo, hdr.r.hi);
        random(hdr.r.empty, 9, 3);
        random(hdr.r.one, 77, 77);
        random(hdr.r.wide, 0, 0xFFFFFFFFFFFFFFFF);
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.r); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
