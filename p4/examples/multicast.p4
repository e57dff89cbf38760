// Multicast: frames to a known MAC go out one port; broadcast and unknown
// destinations go to the multicast group of the ingress port's VLAN (flood).
// Egress prunes the copy that would go back out the port the frame came from and
// writes the replica id into the frame's last byte of the source MAC.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers { ethernet_t ethernet; }
struct metadata { }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start { packet.extract(hdr.ethernet); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    action forward(bit<9> port) { standard_metadata.egress_spec = port; }
    action flood(bit<16> group) { standard_metadata.mcast_grp = group; }
    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; flood; }
        default_action = flood(1);
    }
    apply { l2.apply(); }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.egress_port == standard_metadata.ingress_port) {
            mark_to_drop(standard_metadata);
        } else if (standard_metadata.instance_type == 5) {
            hdr.ethernet.srcAddr[7:0] = standard_metadata.egress_rid[7:0];
        }
    }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
