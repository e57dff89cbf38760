// The traffic manager's view, written into the packet: frames of type 0x88b7 carry a
// `q` header that egress fills with the queueing fields of standard_metadata; ingress
// sends every frame to port 1 + (ingress port's parity), so ports 0/2 feed port 1.
// Frames of type 0x88b9 come without `q`: egress adds it (24 bytes more on the wire).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header q_t {
    bit<32> enq_qdepth; bit<32> deq_qdepth; bit<32> deq_timedelta;
    bit<32> enq_timestamp; bit<48> egress_ts; bit<16> port;
}
struct headers { ethernet_t eth; q_t q; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x88b7: q; default: accept; }
    }
    state q { pk.extract(hdr.q); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply { sm.egress_spec = 1 + (sm.ingress_port & 1); }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        if (!hdr.q.isValid() && hdr.eth.type == 0x88b9) {
            hdr.q.setValid();
        }
        if (hdr.q.isValid()) {
            hdr.q.enq_qdepth = (bit<32>)sm.enq_qdepth;
            hdr.q.deq_qdepth = (bit<32>)sm.deq_qdepth;
            hdr.q.deq_timedelta = sm.deq_timedelta;
            hdr.q.enq_timestamp = sm.enq_timestamp;
            hdr.q.egress_ts = sm.egress_global_timestamp;
            hdr.q.port = (bit<16>)sm.egress_port;
        }
    }
}
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.q); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
