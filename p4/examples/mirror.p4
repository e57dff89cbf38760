// Clone to a mirror port: frames matched by the mirror ACL (ternary on EtherType)
// are cloned ingress-to-egress to a mirror session; the clone leaves on the session's
// port, cut to the session's length, while the original is forwarded normally. In
// egress the clone is told apart by its instance_type and tagged in the source MAC.
#include <core.p4>
#include <v1model.p4>

const bit<32> I2E_CLONE = 1;

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
    action mirror(bit<32> session) { clone(CloneType.I2E, session); }
    table mirror_acl {
        key = { hdr.ethernet.etherType: ternary; }
        actions = { mirror; NoAction; }
        default_action = NoAction();
    }
    action forward(bit<9> port) { standard_metadata.egress_spec = port; }
    action drop() { mark_to_drop(standard_metadata); }
    table l2 {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply {
        mirror_acl.apply();
        l2.apply();
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.instance_type == I2E_CLONE) {
            hdr.ethernet.srcAddr = 44w0xC10E0000000 ++ 4w0;
        }
    }
}
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
