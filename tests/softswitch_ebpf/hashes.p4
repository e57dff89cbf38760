// Every hash algorithm the eBPF target computes, over field lists of whole and of
// partial bytes (crc16 over 93 bits), with a base and a modulus, written into the packet; for the eBPF target's differential test.
#include <core.p4>
#include <v1model.p4>

header in_t { bit<13> a; bit<32> b; bit<3> c; bit<48> d; bit<16> e; }
header out_t { bit<16> crc16; bit<32> crc32; bit<64> ident; bit<16> csum; bit<16> xor; bit<16> crc_odd;
               bit<8> ranged; }
struct headers { in_t i; out_t o; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.i); pk.extract(hdr.o); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hash(hdr.o.crc16, HashAlgorithm.crc16, 16w0, { hdr.i.a, hdr.i.b, hdr.i.d }, 17w65536);
        hash(hdr.o.crc32, HashAlgorithm.crc32, 32w0, { hdr.i.b, hdr.i.d, hdr.i.e }, 33w0x100000000);
        hash(hdr.o.ident, HashAlgorithm.identity, 64w0, { hdr.i.d, hdr.i.e, hdr.i.b }, 65w0x10000000000000000);
        hash(hdr.o.csum, HashAlgorithm.csum16, 16w0, { hdr.i.a, hdr.i.c, hdr.i.b, hdr.i.d }, 17w65536);
        hash(hdr.o.xor, HashAlgorithm.xor16, 16w0, { hdr.i.b, hdr.i.e, hdr.i.d }, 17w65536);
        hash(hdr.o.crc_odd, HashAlgorithm.crc16, 16w0, { hdr.i.a, hdr.i.c }, 17w65536);
        hash(hdr.o.ranged, HashAlgorithm.crc32, 8w10, { hdr.i.e }, 9w7);
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) {
    apply {
        update_checksum(hdr.i.isValid(), { hdr.i.b, hdr.i.d }, hdr.i.e, HashAlgorithm.crc16);
    }
}
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.i); pk.emit(hdr.o); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
