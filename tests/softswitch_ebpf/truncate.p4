// truncate(): an ingress table action asks for a length, egress may replace it
// (header byte `cut` 1: egress length, 2: egress truncate(0), which keeps ingress's);
// headers pushed before the cut; for the eBPF target's differential test.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header cut_t { bit<8> cut; bit<8> len; bit<16> inner_type; }
header tag_t { bit<32> id; }
struct headers { ethernet_t eth; cut_t c; tag_t tag; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x88b6: cut; default: accept; }
    }
    state cut { pk.extract(hdr.c); transition accept; }
}

control V(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action cut_to(bit<32> n, bit<9> port) { truncate(n); sm.egress_spec = port; }
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table by_port {
        key = { sm.ingress_port: exact; }
        actions = { cut_to; fwd; NoAction; }
        default_action = fwd(7);
    }
    apply {
        by_port.apply();
        if (hdr.c.isValid() && hdr.c.cut == 3) {
            hdr.tag.setValid();
            hdr.tag.id = 0xabcdef01;
        }
    }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (hdr.c.isValid()) {
            if (hdr.c.cut == 1) { truncate(14 + (bit<32>)hdr.c.len); }
            else if (hdr.c.cut == 2) { truncate(0); }
        }
    }
}
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.c); pk.emit(hdr.tag); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
