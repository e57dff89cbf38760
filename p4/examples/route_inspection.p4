// Multi-hop route inspection: frames of EtherType 0x88B5 carry a count and a stack of
// per-hop records. Every switch forwards by its ingress-port table and, in egress,
// pushes its own record (switch id from the control plane, egress port and queue
// depth) in front of the stack, newest hop first. A full stack is left unchanged.
#include <core.p4>
#include <v1model.p4>

const bit<16> TYPE_MRI = 0x88B5;
#define MAX_HOPS 4

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header mri_t { bit<8> count; }
header switch_t { bit<32> swid; bit<16> port; bit<16> qdepth; }

struct headers { ethernet_t ethernet; mri_t mri; switch_t[MAX_HOPS] swtraces; }
struct metadata { bit<8> remaining; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { TYPE_MRI: parse_mri; default: accept; }
    }
    state parse_mri {
        packet.extract(hdr.mri);
        meta.remaining = hdr.mri.count;
        transition select(meta.remaining) { 0: accept; default: parse_swtrace; }
    }
    state parse_swtrace {
        packet.extract(hdr.swtraces.next);
        meta.remaining = meta.remaining - 1;
        transition select(meta.remaining) { 0: accept; default: parse_swtrace; }
    }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action drop() { mark_to_drop(standard_metadata); }
    action forward(bit<9> port) { standard_metadata.egress_spec = port; }
    table port_forward {
        key = { standard_metadata.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply { port_forward.apply(); }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    action add_swtrace(bit<32> swid) {
        hdr.mri.count = hdr.mri.count + 1;
        hdr.swtraces.push_front(1);
        hdr.swtraces[0].setValid();
        hdr.swtraces[0].swid = swid;
        hdr.swtraces[0].port = (bit<16>) standard_metadata.egress_port;
        hdr.swtraces[0].qdepth = (bit<16>) standard_metadata.deq_qdepth;
    }
    table swtrace {
        actions = { add_swtrace; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.mri.isValid() && hdr.mri.count < MAX_HOPS) {
            swtrace.apply();
        }
    }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.mri);
        packet.emit(hdr.swtraces);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
