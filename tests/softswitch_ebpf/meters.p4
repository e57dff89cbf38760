// Meters on both targets: indexed packet and byte meters in ingress, an indexed meter
// in egress, a table's direct meter read by its hit action and by its default action;
// every colour is written into the frame (the eBPF target's meter tests).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header m_t {
    bit<8> idx;      // meter index (out of range: GREEN)
    bit<8> key;      // the table's key
    bit<8> pcolor;   // packets meter, ingress
    bit<8> bcolor;   // bytes meter, ingress
    bit<8> dcolor;   // direct meter, read by the hit and the default action
    bit<8> dmiss;    // 1: the default action ran
    bit<8> ecolor;   // packets meter, egress
}
struct headers { ethernet_t eth; m_t m; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.m); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    meter(8, MeterType.packets) pkts;
    meter(8, MeterType.bytes) octets;
    direct_meter<bit<8>>(MeterType.packets) per_entry;
    action forward(bit<9> port) {
        per_entry.read(hdr.m.dcolor);
        sm.egress_spec = port;
    }
    action miss() {
        per_entry.read(hdr.m.dcolor);
        hdr.m.dmiss = 1;
        sm.egress_spec = 3;
    }
    table classify {
        key = { hdr.m.key: exact; }
        actions = { forward; miss; }
        default_action = miss();
        meters = per_entry;
        size = 64;
    }
    apply {
        pkts.execute_meter((bit<32>)hdr.m.idx, hdr.m.pcolor);
        octets.execute_meter((bit<32>)hdr.m.idx, hdr.m.bcolor);
        classify.apply();
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    meter(4, MeterType.packets) out_pkts;
    apply { out_pkts.execute_meter((bit<32>)hdr.m.idx, hdr.m.ecolor); }
}
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.m); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
