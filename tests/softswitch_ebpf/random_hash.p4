// hash() with HashAlgorithm.random: a random 32-bit value, then base + value % max, for
// the eBPF target's tests (the values differ between targets; the test checks ranges).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header r_t { bit<16> ranged; bit<8> one; bit<32> full; }
struct headers { ethernet_t eth; r_t r; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.r); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(hdr.r.ranged, HashAlgorithm.random, 16w100, { hdr.eth.type }, 17w50);
        hash(hdr.r.one, HashAlgorithm.random, 8w7, { hdr.eth.dst }, 9w1);
        hash(hdr.r.full, HashAlgorithm.random, 32w0, { hdr.eth.src }, 33w0x100000000);
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.r); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
