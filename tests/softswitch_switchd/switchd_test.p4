/* Program for the switch-process tests: port 1 <-> port 2 forwarding, queue
 * metadata written into a probe header, clone, multicast, packet-in/out.
 *   UDP dst 5555: the probe header after UDP gets enq_qdepth, deq_qdepth,
 *                 deq_timedelta, enq_timestamp at egress;
 *   UDP dst 6000: multicast group 1;
 *   UDP dst 7000: I2E clone to session 100 (and forwarded as usual);
 *   UDP dst 8000: sent to the CPU port with the ingress port in packet_in;
 *   UDP dst 9000: a learn_t digest (source MAC, ingress port), forwarded as usual. */
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

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }

header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}

header udp_t { bit<16> srcPort; bit<16> dstPort; bit<16> len; bit<16> checksum; }

header probe_t {
    bit<32> enq_qdepth;
    bit<32> deq_qdepth;
    bit<32> deq_timedelta;
    bit<32> enq_timestamp;
    bit<32> egress_ts;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv4_t       ipv4;
    udp_t        udp;
    probe_t      probe;
}

struct learn_t {
    bit<48> srcAddr;
    bit<9>  port;
}

struct metadata_t { }

parser MyParser(packet_in packet, out headers_t hdr, inout metadata_t meta,
                inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }
    state parse_packet_out { packet.extract(hdr.packet_out); transition parse_ethernet; }
    state parse_ethernet {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 17: parse_udp; default: accept; }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dstPort) { 5555: parse_probe; default: accept; }
    }
    state parse_probe { packet.extract(hdr.probe); transition accept; }
}

control MyVerifyChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    action set_port(bit<9> port) { sm.egress_spec = port; }
    table port_override {      // entries override the 1 <-> 2 default
        key = { sm.ingress_port: exact; }
        actions = { set_port; NoAction; }
        default_action = NoAction();
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            exit;
        }
        if (sm.ingress_port == 1) { sm.egress_spec = 2; } else { sm.egress_spec = 1; }
        port_override.apply();
        if (hdr.udp.isValid()) {
            if (hdr.udp.dstPort == 6000) {
                sm.mcast_grp = 1;
            } else if (hdr.udp.dstPort == 7000) {
                clone(CloneType.I2E, 100);
            } else if (hdr.udp.dstPort == 8000) {
                sm.egress_spec = CPU_PORT;
            } else if (hdr.udp.dstPort == 9000) {
                digest<learn_t>(1, { hdr.ethernet.srcAddr, sm.ingress_port });
            }
        }
    }
}

control MyEgress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.probe.isValid()) {
            hdr.probe.enq_qdepth = (bit<32>) sm.enq_qdepth;
            hdr.probe.deq_qdepth = (bit<32>) sm.deq_qdepth;
            hdr.probe.deq_timedelta = sm.deq_timedelta;
            hdr.probe.enq_timestamp = sm.enq_timestamp;
            hdr.probe.egress_ts = (bit<32>) sm.egress_global_timestamp;
            hdr.udp.checksum = 0;
        }
        if (sm.egress_port == CPU_PORT) {
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = sm.ingress_port;
            hdr.packet_in._pad = 0;
        }
    }
}

control MyComputeChecksum(inout headers_t hdr, inout metadata_t meta) { apply { } }

control MyDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.packet_in);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.probe);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(),
         MyComputeChecksum(), MyDeparser()) main;
