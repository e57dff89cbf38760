// Shared by the P4Info rule programs: headers, parser and the blocks they leave empty.
#include <core.p4>
#include <v1model.p4>

header h8_t { bit<8> v; }
header h16_t { bit<16> v; }
struct headers_t { h8_t a; h16_t b; }
struct meta_t { bit<8> m8; bit<16> m16; bit<32> m32; }
struct learn8_t { bit<8> v; }
struct learn16_t { bit<16> w; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.a); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.a); } }
