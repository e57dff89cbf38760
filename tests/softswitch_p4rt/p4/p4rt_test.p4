/* Program for the P4Runtime server tests: every match kind, counters, meters,
 * registers, a digest, clone and multicast, and controller headers for packet I/O. */
#include <core.p4>
#include <v1model.p4>

#define CPU_PORT 510

@controller_header("packet_out")
header packet_out_t {
    bit<9> egress_port;
    bit<7> _pad;
}

@controller_header("packet_in")
header packet_in_t {
    bit<9> ingress_port;
    bit<7> _pad;
}

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  diffserv;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  port;
}

struct metadata_t {
    bit<32> color;
}

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t standard_metadata) {
    value_set<bit<16>>(4) ipv4_types;
    state start {
        transition select(standard_metadata.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out {
        packet.extract(hdr.packet_out);
        transition parse_ethernet;
    }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            0x0800: parse_ipv4;
            ipv4_types: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyIngress(inout headers_t hdr, inout metadata_t meta,
                  inout standard_metadata_t standard_metadata) {
    counter(64, CounterType.packets_and_bytes) port_counter;
    meter(16, MeterType.packets) port_meter;
    register<bit<32>>(8) last_len;
    direct_counter(CounterType.packets_and_bytes) fwd_counter;
    direct_meter<bit<32>>(MeterType.bytes) route_meter;

    action drop() {
        mark_to_drop(standard_metadata);
    }
    action set_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action to_cpu() {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = standard_metadata.ingress_port;
    }
    action learn() {
        digest<learn_t>(1, {hdr.ethernet.srcAddr, standard_metadata.ingress_port});
    }
    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    action mirror(bit<32> session, bit<9> port) {
        standard_metadata.egress_spec = port;
        clone(CloneType.I2E, session);
    }

    table forward {
        key = { hdr.ethernet.dstAddr: exact; }
        actions = { set_port; to_cpu; flood; mirror; drop; NoAction; }
        counters = fwd_counter;
        default_action = NoAction();
        size = 4;
    }
    action route(bit<9> port) {
        route_meter.read(meta.color);
        standard_metadata.egress_spec = port;
    }
    table routes {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { route; drop; NoAction; }
        meters = route_meter;
        default_action = NoAction();
    }
    table acl {
        key = {
            hdr.ethernet.etherType: ternary;
            hdr.ipv4.protocol: range;
            hdr.ipv4.srcAddr: optional;
        }
        actions = { drop; to_cpu; NoAction; }
        default_action = NoAction();
    }
    table ecmp {
        key = {
            hdr.ipv4.dstAddr: exact;
            hdr.ipv4.srcAddr: selector;
        }
        actions = { set_port; drop; }
        implementation = action_selector(HashAlgorithm.crc16, 32w16, 32w14);
        size = 16;
    }
    table learning {
        key = { hdr.ethernet.srcAddr: exact; }
        actions = { learn; NoAction; }
        const default_action = learn();
    }

    apply {
        if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        port_counter.count((bit<32>)standard_metadata.ingress_port);
        port_meter.execute_meter((bit<32>)standard_metadata.ingress_port, meta.color);
        last_len.write((bit<32>)standard_metadata.ingress_port, standard_metadata.packet_length);
        learning.apply();
        forward.apply();
        if (hdr.ipv4.isValid()) {
            routes.apply();
            ecmp.apply();
        }
        acl.apply();
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
