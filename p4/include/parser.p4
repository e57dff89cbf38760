/* Parser, checksum controls and deparser of the RoCEv2 INT data plane. */
#ifndef INT_ROCEV2_PARSER_P4_
#define INT_ROCEV2_PARSER_P4_

#include "defines.p4"
#include "headers.p4"
#include "metadata.p4"

/* Parses Ethernet [/ link sequence] / (ARP | IPv4 [/ UDP [/ INT]]).
 * UDP is parsed only for unfragmented option-less IPv4; INT only behind
 * INT_UDP_PORT. The hop stack is extracted as one opaque varbit so a sink
 * can remove it; its length comes from the shim. A shim of another type or
 * an MD header of another version stops the parse there (the rest stays
 * payload and is forwarded untouched). Truncation anywhere shows up as
 * standard_metadata.parser_error, which ingress turns into a counted drop. */
parser IntParser(packet_in packet, out headers_t hdr,
                 inout local_metadata_t meta,
                 inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_LINK_SEQ: parse_link_seq;
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_link_seq {
        packet.extract(hdr.link_seq);
        transition select(hdr.link_seq.next_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_ARP: parse_arp;
            default: accept;
        }
    }

    state parse_arp {
        packet.extract(hdr.arp);
        transition accept;
    }

    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.frag_offset,
                          hdr.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        packet.extract(hdr.udp);
        transition select(hdr.udp.dst_port) {
            INT_UDP_PORT: parse_int_shim;
            default: accept;
        }
    }

    state parse_int_shim {
        packet.extract(hdr.int_shim);
        transition select(hdr.int_shim.int_type, hdr.int_shim.npt, hdr.int_shim.len) {
            (INT_SHIM_TYPE_MD, INT_SHIM_NPT_UDP, 0): accept;   /* too short: dropped */
            (INT_SHIM_TYPE_MD, INT_SHIM_NPT_UDP, 1): accept;
            (INT_SHIM_TYPE_MD, INT_SHIM_NPT_UDP, 2): accept;
            (INT_SHIM_TYPE_MD, INT_SHIM_NPT_UDP, _): parse_int_md;
            default: accept;                                   /* opaque */
        }
    }

    state parse_int_md {
        packet.extract(hdr.int_md);
        transition select(hdr.int_md.ver, hdr.int_shim.len) {
            (INT_MD_VERSION, INT_MD_WORDS): accept;             /* no hop yet */
            (INT_MD_VERSION, _): parse_int_stack;
            default: accept;                                   /* opaque */
        }
    }

    state parse_int_stack {
        packet.extract(hdr.int_stack,
                       ((bit<32>)hdr.int_shim.len - INT_MD_WORDS) << 5);
        transition accept;
    }
}

control IntVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid() && hdr.ipv4.ihl == 5,
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

/* The IPv4 checksum of every IPv4 header that leaves (forwarded packets
 * always had their TTL decremented). The UDP checksum is never touched:
 * RoCEv2 sends 0, and a sink restores the original bytes, so a non-zero
 * checksum is valid again when the packet leaves the INT domain. */
control IntComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn,
              hdr.ipv4.total_len, hdr.ipv4.identification, hdr.ipv4.flags,
              hdr.ipv4.frag_offset, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
        update_checksum(hdr.report_ipv4.isValid(),
            { hdr.report_ipv4.version, hdr.report_ipv4.ihl, hdr.report_ipv4.dscp,
              hdr.report_ipv4.ecn, hdr.report_ipv4.total_len,
              hdr.report_ipv4.identification, hdr.report_ipv4.flags,
              hdr.report_ipv4.frag_offset, hdr.report_ipv4.ttl,
              hdr.report_ipv4.protocol, hdr.report_ipv4.src_addr,
              hdr.report_ipv4.dst_addr },
            hdr.report_ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

/* Emits valid headers in wire order: a report's outer headers and sink
 * metadata, then the (inner) packet, whose new hop record goes right after
 * the MD header and before the hop records of earlier switches. */
control IntDeparser(packet_out packet, in headers_t hdr) {
    apply {
        packet.emit(hdr.ethernet);
        packet.emit(hdr.link_seq);
        packet.emit(hdr.arp);
        packet.emit(hdr.report_ipv4);
        packet.emit(hdr.report_udp);
        packet.emit(hdr.report_group);
        packet.emit(hdr.report_individual);
        packet.emit(hdr.report_main);
        packet.emit(hdr.report_md.node_id);
        packet.emit(hdr.report_md.ports);
        packet.emit(hdr.report_md.hop_latency);
        packet.emit(hdr.report_md.queue);
        packet.emit(hdr.report_md.ingress_ts);
        packet.emit(hdr.report_md.egress_ts);
        packet.emit(hdr.report_md.tx_util);
        packet.emit(hdr.report_md.tx_bytes);
        packet.emit(hdr.report_md.queue_bytes);
        packet.emit(hdr.report_md.line_rate);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.int_shim);
        packet.emit(hdr.int_md);
        packet.emit(hdr.hop.node_id);
        packet.emit(hdr.hop.ports);
        packet.emit(hdr.hop.hop_latency);
        packet.emit(hdr.hop.queue);
        packet.emit(hdr.hop.ingress_ts);
        packet.emit(hdr.hop.egress_ts);
        packet.emit(hdr.hop.tx_util);
        packet.emit(hdr.hop.tx_bytes);
        packet.emit(hdr.hop.queue_bytes);
        packet.emit(hdr.hop.line_rate);
        packet.emit(hdr.int_stack);
    }
}

#endif  /* INT_ROCEV2_PARSER_P4_ */
