// Stateful firewall with a Bloom filter in registers: traffic from the inside
// (port 1) to the outside (port 2) is always allowed and records its flow in two
// bit arrays, at positions given by two hashes (crc16, crc32) of the 5-tuple.
// Traffic from the outside is allowed only when both bits of the reversed 5-tuple
// are set, i.e. when an inside host talked to it first.
#include <core.p4>
#include <v1model.p4>

#define BLOOM_ENTRIES 4096

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset; bit<8> ttl;
    bit<8> protocol; bit<16> hdrChecksum; bit<32> srcAddr; bit<32> dstAddr;
}
header l4_t { bit<16> srcPort; bit<16> dstPort; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; l4_t l4; }
struct metadata { bit<32> pos1; bit<32> pos2; bit<1> direction; }

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 6: parse_l4; 17: parse_l4; default: accept; }
    }
    state parse_l4 { packet.extract(hdr.l4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<1>>(BLOOM_ENTRIES) bloom_1;
    register<bit<1>>(BLOOM_ENTRIES) bloom_2;

    action drop() { mark_to_drop(standard_metadata); }
    action set_direction(bit<1> dir, bit<9> port) {
        meta.direction = dir;
        standard_metadata.egress_spec = port;
    }
    table check_ports {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_direction; drop; }
        default_action = drop();
    }
    action hash_positions(bit<32> a, bit<32> b, bit<16> pa, bit<16> pb) {
        hash(meta.pos1, HashAlgorithm.crc16, (bit<32>) 0,
             { a, b, pa, pb, hdr.ipv4.protocol }, (bit<32>) BLOOM_ENTRIES);
        hash(meta.pos2, HashAlgorithm.crc32, (bit<32>) 0,
             { a, b, pa, pb, hdr.ipv4.protocol }, (bit<32>) BLOOM_ENTRIES);
    }
    apply {
        if (!hdr.l4.isValid()) { drop(); return; }
        if (check_ports.apply().hit) {
            if (meta.direction == 0) {
                hash_positions(hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.l4.srcPort, hdr.l4.dstPort);
                bloom_1.write(meta.pos1, 1);
                bloom_2.write(meta.pos2, 1);
            } else {
                hash_positions(hdr.ipv4.dstAddr, hdr.ipv4.srcAddr, hdr.l4.dstPort, hdr.l4.srcPort);
                bit<1> b1;
                bit<1> b2;
                bloom_1.read(b1, meta.pos1);
                bloom_2.read(b2, meta.pos2);
                if (b1 != 1 || b2 != 1) { drop(); }
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta,
                 inout standard_metadata_t standard_metadata) { apply { } }
control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); packet.emit(hdr.l4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
