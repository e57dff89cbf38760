/* User metadata, the loss-event digest and the values one hop record is
 * built from.
 */
#ifndef INT_ROCEV2_METADATA_P4_
#define INT_ROCEV2_METADATA_P4_

#include "headers.p4"

/* Sent to the controller once per forward jump of a link sequence number:
 * packets expected..received-1 were lost on the link into ingress_port. */
struct link_loss_digest_t {
    bit<16> ingress_port;
    bit<32> expected;
    bit<32> received;
}

/* What a hop record (or a report's sink metadata) says about this switch. */
struct hop_values_t {
    bit<32> node_id;
    bit<16> ingress_port;
    bit<16> egress_port;
    bit<32> hop_latency;
    bit<24> queue_occupancy;
    bit<64> ingress_ts;
    bit<64> egress_ts;
    bit<32> tx_bytes;
    bit<32> queue_bytes;
    bit<32> line_rate;
}

struct local_metadata_t {
    /* ingress -> egress (normal packets keep user metadata) */
    bit<1>  dropped;            /* ingress decided to drop */
    bit<1>  no_int;             /* IPv4 fragment: no INT processing */
    bit<2>  int_state;          /* INT_STATE_* of the packet as received */
    bit<2>  sink_mode;          /* SINK_* of the egress port */
    bit<32> report_mask;        /* report when (candidate number & mask) == 0 */
    /* ingress -> egress and into the report clone */
    @field_list(FL_REPORT) bit<1>  int_source;       /* watchlist hit: insert INT */
    @field_list(FL_REPORT) bit<16> src_instruction;  /* bitmaps the watchlist chose */
    @field_list(FL_REPORT) bit<16> src_ds_instruction;
    @field_list(FL_REPORT) bit<8>  src_max_hops;
    @field_list(FL_REPORT) bit<5>  src_hop_ml;
    @field_list(FL_REPORT) port_t  rpt_ingress_port; /* the original packet's ports */
    @field_list(FL_REPORT) port_t  rpt_egress_port;
    @field_list(FL_REPORT) bit<48> rpt_ingress_ts;
    /* egress scratch */
    bit<32> node_id;
    port_t  hop_port;           /* port the hop record describes */
    bit<32> line_rate_mbps;
    bit<16> mtu;
    bit<1>  is_fabric;
    bit<1>  ecn_enabled;
    bit<32> ecn_kmin_bytes;
    bit<32> ecn_kmax_bytes;
    bit<16> ecn_pmax;
    bit<1>  report_enabled;
    mac_addr_t  report_src_mac;
    mac_addr_t  report_dst_mac;
    ipv4_addr_t report_src_ip;
    ipv4_addr_t report_dst_ip;
    bit<16> report_dst_port;
    bit<16> report_payload_bytes;
    bit<6>  report_hw_id;
    bit<32> queue_bytes;        /* hop port's queue bytes after this packet left */
    bit<24> queue_occupancy;    /* hop port's deq_qdepth */
    bit<32> tx_bytes_before;    /* egress port's tx bytes before this packet */
    bit<32> hop_tx_bytes;       /* hop port's tx bytes for the record */
    bit<32> len_delta;          /* bytes added (two's complement) in egress */
}

#endif  /* INT_ROCEV2_METADATA_P4_ */
