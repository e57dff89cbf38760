// Source routing: the sender lists the output port of every hop in a header stack
// (bos marks the last entry). Each switch pops the first entry and forwards on its
// port; the last hop restores the IPv4 EtherType. Frames without a route are dropped.
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_SRCROUTING = 0x1234;
const bit<16> TYPE_IPV4 = 0x0800;
#define MAX_HOPS 8

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header srcRoute_t { bit<1> bos; bit<15> port; }

struct headers { ethernet_t ethernet; srcRoute_t[MAX_HOPS] srcRoutes; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_SRCROUTING: parse_srcRouting;
            default: accept;
        }
    }
    state parse_srcRouting {
        packet.extract(hdr.srcRoutes.next);
        transition select(hdr.srcRoutes.last.bos) {
            1: accept;
            default: parse_srcRouting;
        }
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action srcRoute_nhop() {
        standard_metadata.egress_spec = (bit<9>) hdr.srcRoutes[0].port;
        hdr.srcRoutes.pop_front(1);
    }
    action srcRoute_finish() { hdr.ethernet.etherType = TYPE_IPV4; }
    apply {
        if (hdr.srcRoutes[0].isValid()) {
            if (hdr.srcRoutes[0].bos == 1) {
                srcRoute_finish();
            }
            srcRoute_nhop();
        } else {
            drop();
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.srcRoutes);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
