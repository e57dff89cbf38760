// crc16_custom and crc32_custom (parameters set at run time), for the differential test
// (test_ebpf_features.py).
#include <core.p4>
#include <v1model.p4>

header in_t { bit<13> a; bit<32> b; bit<3> c; bit<48> d; bit<16> e; }
header out_t { bit<16> c16; bit<32> c32; bit<16> c16_odd; bit<8> ranged; }
struct headers { in_t i; out_t o; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.i); pk.extract(hdr.o); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(hdr.o.c16, HashAlgorithm.crc16_custom, 16w0, { hdr.i.a, hdr.i.b, hdr.i.d }, 17w65536);
        hash(hdr.o.c32, HashAlgorithm.crc32_custom, 32w0, { hdr.i.b, hdr.i.d, hdr.i.e }, 33w0x100000000);
        hash(hdr.o.c16_odd, HashAlgorithm.crc16_custom, 16w0, { hdr.i.a, hdr.i.c }, 17w65536);
        hash(hdr.o.ranged, HashAlgorithm.crc32_custom, 8w10, { hdr.i.e }, 9w7);
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) {
    apply { update_checksum(hdr.i.isValid(), { hdr.i.b, hdr.i.d }, hdr.i.e, HashAlgorithm.crc16_custom); }
}
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.i); pk.emit(hdr.o); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
