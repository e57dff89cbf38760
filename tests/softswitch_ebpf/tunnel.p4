// Header add and remove: port 1 pushes a 6-byte tag between Ethernet and IPv4
// (EtherType 0x88b5), port 2 pops it; for the eBPF target's differential test.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<16> id; bit<16> hops; bit<16> inner_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
struct headers { ethernet_t eth; tag_t tag; ipv4_t ip; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x88b5: tag; 0x0800: ip; default: accept; }
    }
    state tag {
        pk.extract(hdr.tag);
        transition select(hdr.tag.inner_type) { 0x0800: ip; default: accept; }
    }
    state ip { pk.extract(hdr.ip); transition accept; }
}

control V(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 3;
        if (sm.ingress_port == 1 && !hdr.tag.isValid()) {
            hdr.tag.setValid();
            hdr.tag.id = (bit<16>)sm.ingress_port + 0x100;
            hdr.tag.hops = 1;
            hdr.tag.inner_type = hdr.eth.type;
            hdr.eth.type = 0x88b5;
        } else if (sm.ingress_port == 2 && hdr.tag.isValid()) {
            hdr.eth.type = hdr.tag.inner_type;
            hdr.tag.setInvalid();
        } else if (sm.ingress_port == 4) {
            hdr.ip.setInvalid();
        }
        if (hdr.ip.isValid()) { hdr.ip.ttl = hdr.ip.ttl - 1; }
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.tag); pk.emit(hdr.ip); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
