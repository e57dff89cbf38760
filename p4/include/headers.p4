/* Packet formats of formats/FORMATS.md as P4_16 header types: the P4 side of
 * "formats defined once per language". Field order is wire order, most
 * significant bit first; widths add up to whole bytes per header.
 */
#ifndef INT_ROCEV2_HEADERS_P4_
#define INT_ROCEV2_HEADERS_P4_

typedef bit<9>  port_t;
typedef bit<48> mac_addr_t;
typedef bit<32> ipv4_addr_t;

header ethernet_h {
    mac_addr_t dst_addr;
    mac_addr_t src_addr;
    bit<16>    ether_type;
}

/* Link sequence header (EtherType 0x88B5), switch-to-switch links only:
 * the sending port's packet count, then the EtherType it displaced. */
header link_seq_h {
    bit<32> seq;
    bit<16> next_type;
}

/* ARP for IPv4 over Ethernet (RFC 826). */
header arp_h {
    bit<16>     htype;
    bit<16>     ptype;
    bit<8>      hlen;
    bit<8>      plen;
    bit<16>     oper;
    mac_addr_t  sha;
    ipv4_addr_t spa;
    mac_addr_t  tha;
    ipv4_addr_t tpa;
}

/* IPv4 without options (packets with options are dropped, see README). */
header ipv4_h {
    bit<4>      version;
    bit<4>      ihl;
    bit<6>      dscp;
    bit<2>      ecn;
    bit<16>     total_len;
    bit<16>     identification;
    bit<3>      flags;
    bit<13>     frag_offset;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header udp_h {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> length;
    bit<16> checksum;
}

/* InfiniBand Base Transport Header (RoCEv2 annex), 12 bytes. Declared for
 * the formats contract; the program forwards it as payload. */
header bth_h {
    bit<8>  opcode;
    bit<1>  se;
    bit<1>  migreq;
    bit<2>  pad_cnt;
    bit<4>  tver;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<7>  resv7;
    bit<24> psn;
}

/* INT over UDP shim (INT spec v2.1), 4 bytes. len counts the 4-byte words
 * after the shim (MD header + hop stack); with NPT 1 the original UDP
 * destination port follows. */
header int_shim_h {
    bit<4>  int_type;
    bit<2>  npt;
    bit<2>  rsvd;
    bit<8>  len;
    bit<16> udp_dport;
}

/* INT-MD header, 12 bytes. */
header int_md_h {
    bit<4>  ver;
    bit<1>  d;
    bit<1>  e;
    bit<1>  m;
    bit<12> rsvd;
    bit<5>  hop_ml;
    bit<8>  remaining_hop_cnt;
    bit<16> instruction_bitmap;
    bit<16> ds_id;
    bit<16> ds_instruction;
    bit<16> ds_flags;
}

/* Hop records already in the packet (pushed by earlier hops), kept opaque:
 * at most 255 - 3 words. */
header int_stack_h {
    varbit<8064> data;
}

/* One header per hop-record field kind, made valid by the bitmaps and
 * emitted in bit order: standard fields first, then the HPCC DS fields. */
header int_node_id_h      { bit<32> node_id; }                              /* bit 0 */
header int_ports_h        { bit<16> ingress_port; bit<16> egress_port; }    /* bit 1 */
header int_hop_latency_h  { bit<32> hop_latency; }                          /* bit 2 */
header int_queue_h        { bit<8> queue_id; bit<24> queue_occupancy; }     /* bit 3 */
header int_ingress_ts_h   { bit<64> ingress_ts; }                           /* bit 4 */
header int_egress_ts_h    { bit<64> egress_ts; }                            /* bit 5 */
header int_tx_util_h      { bit<32> tx_util; }                              /* bit 7 */
header int_tx_bytes_h     { bit<32> tx_bytes; }                             /* DS bit 0 */
header int_queue_bytes_h  { bit<32> queue_bytes; }                          /* DS bit 1 */
header int_line_rate_h    { bit<32> line_rate; }                            /* DS bit 2 */

/* The fields of one hop record, in wire order. */
struct int_hop_t {
    int_node_id_h     node_id;
    int_ports_h       ports;
    int_hop_latency_h hop_latency;
    int_queue_h       queue;
    int_ingress_ts_h  ingress_ts;
    int_egress_ts_h   egress_ts;
    int_tx_util_h     tx_util;
    int_tx_bytes_h    tx_bytes;
    int_queue_bytes_h queue_bytes;
    int_line_rate_h   line_rate;
}

/* Telemetry Report v2.0 group header, 8 bytes. */
header report_group_h {
    bit<4>  ver;
    bit<6>  hw_id;
    bit<22> seq;
    bit<32> node_id;
}

/* Telemetry Report v2.0 individual report header, 4 bytes. rep_len counts
 * words after this header's first word; md_len the sink metadata words. */
header report_individual_h {
    bit<4> rep_type;
    bit<4> in_type;
    bit<8> rep_len;
    bit<8> md_len;
    bit<1> d;
    bit<1> q;
    bit<1> f;
    bit<1> i;
    bit<4> rsvd;
}

/* Telemetry Report v2.0 individual report main contents (INT), 8 bytes. */
header report_main_h {
    bit<16> rep_md_bits;
    bit<16> ds_id;
    bit<16> ds_md_bits;
    bit<16> ds_md_status;
}

/* Every header the program parses or emits, in deparser order: a telemetry
 * report's outer headers come before the inner packet they carry. */
struct headers_t {
    ethernet_h          ethernet;
    link_seq_h          link_seq;
    arp_h               arp;
    ipv4_h              report_ipv4;
    udp_h               report_udp;
    report_group_h      report_group;
    report_individual_h report_individual;
    report_main_h       report_main;
    int_hop_t           report_md;
    ipv4_h              ipv4;
    udp_h               udp;
    int_shim_h          int_shim;
    int_md_h            int_md;
    int_hop_t           hop;
    int_stack_h         int_stack;
}

#endif  /* INT_ROCEV2_HEADERS_P4_ */
