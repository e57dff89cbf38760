// Resubmit and recirculate on both targets (after the conformance test h7_recirc, with
// an Ethernet header so a tc program sees the frames): instance_type in ingress and
// egress, preserved field lists, metadata reset, loops cut after 64 passes, and both
// mixed with I2E and E2E clones (never cloning inside a loop: copies of copies would
// multiply); a register counts the passes of each instance type.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header h_t { bit<8> op; bit<8> rounds; bit<8> itype_in; bit<8> itype_eg; bit<8> kept; bit<8> lost; }
struct headers_t { eth_t eth; h_t h; }
struct meta_t {
    @field_list(1) bit<8> kept;
    bit<8> lost;
}

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.eth); pkt.extract(hdr.h); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

register<bit<32>>(8) seen_in;
register<bit<32>>(8) seen_eg;

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<32> n;
        seen_in.read(n, (bit<32>)sm.instance_type & 7);
        seen_in.write((bit<32>)sm.instance_type & 7, n + 1);
        sm.egress_spec = 1;
        hdr.h.itype_in = (bit<8>) sm.instance_type;
        bit<8> op = hdr.h.op & 0x0f;
        if (op == 1 && sm.instance_type == 0) {
            meta.kept = 0x11; meta.lost = 0x22;
            resubmit_preserving_field_list(1);
        } else if (op == 1) {
            hdr.h.kept = meta.kept; hdr.h.lost = meta.lost;
        }
        if (op == 2) {
            hdr.h.rounds = hdr.h.rounds + 1;
            hdr.h.kept = meta.kept; hdr.h.lost = meta.lost;
        }
        if (op == 4) { resubmit_preserving_field_list(1); }        // a loop: cut after 64 passes
        if (hdr.h.op[4:4] == 1 && sm.instance_type != 1 && sm.instance_type != 4) {
            clone(CloneType.I2E, 32w8);
        }
        if (hdr.h.op[5:5] == 1) { mark_to_drop(sm); }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<32> n;
        seen_eg.read(n, (bit<32>)sm.instance_type & 7);
        seen_eg.write((bit<32>)sm.instance_type & 7, n + 1);
        hdr.h.itype_eg = (bit<8>) sm.instance_type;
        bit<8> op = hdr.h.op & 0x0f;
        if (op == 2 && hdr.h.rounds < 3) {
            meta.kept = hdr.h.rounds; meta.lost = 0x77;
            recirculate_preserving_field_list(1);
        }
        if (op == 3 && sm.instance_type == 0) {
            clone(CloneType.E2E, 32w9);
        }
        if (op == 5 && sm.instance_type != 2) {                     // a loop: cut after 64 passes
            hdr.h.rounds = hdr.h.rounds + 1;
            recirculate_preserving_field_list(1);
        }
        if (hdr.h.op[6:6] == 1 && sm.instance_type == 0 && hdr.h.rounds == 0) {
            clone(CloneType.E2E, 32w9);
        }
    }
}
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.eth); pkt.emit(hdr.h); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
