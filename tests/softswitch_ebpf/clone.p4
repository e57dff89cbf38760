// Clones and multicast on both targets: I2E and E2E clones to sessions of one or more
// ports, preserved field lists, instance_type and egress_rid seen in egress, egress
// edits an E2E clone carries, a clone whose original is dropped, an E2E clone of an I2E
// clone, a header an E2E clone adds, multicast replicas (group = the tag's second byte
// 0xA0..0xA3; after mark_to_drop too), and state (a register, a counter) each pass updates.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> etype; }
header tag_t { bit<8> op; bit<8> itype; bit<16> rid; bit<32> note; }
header extra_t { bit<32> seen; }
struct headers { eth_t eth; tag_t tag; extra_t extra; }
struct metadata {
    @field_list(1) bit<32> kept;
    bit<32> lost;
    @field_list(1, 2) bit<16> both;
}

parser P(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.etype) { 0x88b5: tag; default: accept; }
    }
    state tag { pkt.extract(hdr.tag); transition accept; }
}

control VC(inout headers hdr, inout metadata meta) { apply { } }

register<bit<32>>(4) passes;
counter(16, CounterType.packets_and_bytes) out_port;

control Ing(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        meta.kept = 0xAABBCCDD;
        meta.lost = 0x11111111;
        sm.egress_spec = 1;
        if (hdr.tag.isValid()) {
            meta.both = hdr.tag.note[15:0];
            sm.egress_spec = (bit<9>)hdr.tag.op[1:0] + 1;
            if (hdr.tag.op[2:2] == 1) {
                clone_preserving_field_list(CloneType.I2E, 10 + (bit<32>)hdr.tag.op[5:4], 1);
            }
            if (hdr.tag.op[3:3] == 1) { mark_to_drop(sm); }
            if (hdr.tag.itype[7:4] == 0xA) { sm.mcast_grp = (bit<16>)hdr.tag.itype[1:0]; }
        }
    }
}

control Eg(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        bit<32> n;
        passes.read(n, (bit<32>)sm.instance_type & 3);
        passes.write((bit<32>)sm.instance_type & 3, n + 1);
        out_port.count((bit<32>)sm.egress_port & 15);
        hdr.eth.src = (bit<48>)sm.egress_port;
        if (hdr.tag.isValid()) {
            hdr.tag.itype = (bit<8>)sm.instance_type;
            hdr.tag.rid = sm.egress_rid;
            hdr.tag.note = hdr.tag.note + (meta.kept ^ meta.lost) + (bit<32>)meta.both;
            if (sm.instance_type == 0 && hdr.tag.op[6:6] == 1) {
                clone_preserving_field_list(CloneType.E2E, 12, 2);
            }
            if (sm.instance_type == 1 && hdr.tag.op[7:7] == 1) { clone(CloneType.E2E, 13); }
            if (sm.instance_type == 2) {
                hdr.extra.setValid();
                hdr.extra.seen = (bit<32>)sm.packet_length;
            }
        }
    }
}

control CC(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.tag); pkt.emit(hdr.extra); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
