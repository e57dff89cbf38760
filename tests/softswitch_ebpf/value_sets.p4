// Parser value sets on both targets: one over the EtherType, one of a struct over two
// select keys (their values concatenated); the state reached is written into the frame
// (the eBPF target's value set tests).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header x_t { bit<8> a; bit<16> b; bit<8> seen; }
struct pair_t { bit<8> a; bit<16> b; }
struct headers { ethernet_t eth; x_t x; }
struct meta_t { bit<8> path; }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) etypes;
    value_set<pair_t>(8) pairs;
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.type) {
            etypes: parse_x;
            0x88b5: parse_x;
            default: accept;
        }
    }
    state parse_x {
        pk.extract(hdr.x);
        m.path = 1;
        transition select(hdr.x.a, hdr.x.b) {
            pairs: in_pairs;
            (8w0x11, 16w0x2222): fixed;
            default: accept;
        }
    }
    state in_pairs { m.path = 2; transition accept; }
    state fixed { m.path = 3; transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action to_port(bit<9> port) { sm.egress_spec = port; }
    table ports { actions = { to_port; } default_action = to_port(1); }
    apply {
        ports.apply();
        if (hdr.x.isValid()) { hdr.x.seen = m.path; }
        else { hdr.eth.src = 0; }
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.x); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
