/* Ingress: link sequence check, ARP proxy, IPv4 routing, INT classification,
 * INT source watchlist, INT sink decision and the report clone.
 * Needs the top-level externs declared in int_rocev2.p4 (queue_bytes,
 * drop_reasons, int_events).
 */
#ifndef INT_ROCEV2_INGRESS_P4_
#define INT_ROCEV2_INGRESS_P4_

#include "defines.p4"
#include "headers.p4"
#include "metadata.p4"
#include "int_hop.p4"

control SwitchIngress(inout headers_t hdr, inout local_metadata_t meta,
                      inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNT, CounterType.packets_and_bytes) ingress_port_counter;

    /* Link sequence state per ingress port (see README "Link sequence"). */
    register<bit<32>>(PORT_COUNT) link_rx_expected;
    register<bit<64>>(PORT_COUNT) link_lost_packets;
    register<bit<64>>(PORT_COUNT) link_reordered_packets;
    register<bit<64>>(PORT_COUNT) link_loss_events;
    register<bit<64>>(PORT_COUNT) link_resyncs;

    direct_counter(CounterType.packets_and_bytes) int_watchlist_counter;

    /* Packets a report-mode sink could report on, so far (index 0). */
    register<bit<32>>(1) report_candidates;

    action drop_packet(bit<32> reason) {
        mark_to_drop(standard_metadata);
        meta.dropped = 1;
        drop_reasons.count(reason);
    }

    /* ---- ARP: the switch answers requests for addresses the controller
     * lists (gateway and proxied neighbours), so hosts need no static
     * neighbour entries. */
    action arp_reply(mac_addr_t mac) {
        ipv4_addr_t target = hdr.arp.tpa;
        hdr.arp.oper = 2;
        hdr.arp.tha = hdr.arp.sha;
        hdr.arp.tpa = hdr.arp.spa;
        hdr.arp.sha = mac;
        hdr.arp.spa = target;
        hdr.ethernet.dst_addr = hdr.ethernet.src_addr;
        hdr.ethernet.src_addr = mac;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    action arp_miss() {
        mark_to_drop(standard_metadata);
        meta.dropped = 1;
        drop_reasons.count(DROP_ARP);
    }

    table arp_proxy {
        key = { hdr.arp.tpa: exact @name("target_ip"); }
        actions = { arp_reply; arp_miss; }
        default_action = arp_miss();
        size = 1024;
    }

    /* ---- IPv4 routing to the next hop. */
    action ipv4_forward(port_t port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    action ipv4_no_route() {
        mark_to_drop(standard_metadata);
        meta.dropped = 1;
        drop_reasons.count(DROP_NO_ROUTE);
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dst_addr: lpm @name("dst_addr"); }
        actions = { ipv4_forward; ipv4_no_route; }
        default_action = ipv4_no_route();
        size = 1024;
    }

    /* ---- INT source: which flows get INT, with which bitmaps. */
    action int_source(bit<16> instruction_bitmap, bit<16> ds_instruction,
                      bit<8> max_hops) {
        meta.int_source = 1;
        meta.src_instruction = instruction_bitmap & INT_SUPPORTED_INSTRUCTIONS;
        meta.src_ds_instruction = ds_instruction & INT_SUPPORTED_DS_INSTRUCTIONS;
        meta.src_max_hops = max_hops;
    }

    table int_watchlist {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            hdr.udp.src_port: ternary @name("src_port");
            hdr.udp.dst_port: ternary @name("dst_port");
            hdr.ipv4.dscp: ternary @name("dscp");
        }
        actions = { int_source; NoAction; }
        default_action = NoAction();
        counters = int_watchlist_counter;
        size = 1024;
    }

    /* ---- INT sink mode of the egress port. */
    action sink_report() { meta.sink_mode = SINK_REPORT; }
    action sink_host() { meta.sink_mode = SINK_HOST; }
    action sink_none() { meta.sink_mode = SINK_NONE; }

    table int_sink {
        key = { standard_metadata.egress_spec: exact @name("egress_port"); }
        actions = { sink_report; sink_host; sink_none; }
        default_action = sink_none();
        size = PORT_COUNT;
    }

    /* ---- Report sampling: keeps the collector's load bounded. A report-mode
     * sink reports candidate k (counted per switch from 0) when
     * (k & mask) == 0: mask 0 reports every packet, 3 one in four. */
    action set_report_sampling(bit<32> mask) {
        meta.report_mask = mask;
    }

    table report_sampling {
        actions = { set_report_sampling; }
        default_action = set_report_sampling(0);
        size = 1;
    }

    apply {
        ingress_port_counter.count((bit<32>)standard_metadata.ingress_port);

        /* Every frame that arrives with a link sequence header counts on its
         * link, whatever happens to it afterwards. */
        if (hdr.link_seq.isValid()) {
            bit<32> port_idx = (bit<32>)standard_metadata.ingress_port;
            bit<32> expected;
            link_rx_expected.read(expected, port_idx);
            bit<32> received = hdr.link_seq.seq;
            bit<32> ahead = received - expected;
            bit<32> behind = expected - received;
            if (ahead == 0) {
                link_rx_expected.write(port_idx, received + 1);
            } else if (ahead < LINK_SEQ_RESYNC_GAP) {
                bit<64> lost;
                link_lost_packets.read(lost, port_idx);
                link_lost_packets.write(port_idx, lost + (bit<64>)ahead);
                bit<64> events;
                link_loss_events.read(events, port_idx);
                link_loss_events.write(port_idx, events + 1);
                digest<link_loss_digest_t>(1,
                    { (bit<16>)standard_metadata.ingress_port, expected, received });
                link_rx_expected.write(port_idx, received + 1);
            } else if (behind <= LINK_SEQ_REORDER_WINDOW) {
                /* A late packet: it was counted lost when its successor
                 * arrived, so the loss is taken back. */
                bit<64> reordered;
                link_reordered_packets.read(reordered, port_idx);
                link_reordered_packets.write(port_idx, reordered + 1);
                bit<64> lost_back;
                link_lost_packets.read(lost_back, port_idx);
                link_lost_packets.write(port_idx, lost_back |-| 1);
            } else {
                bit<64> resyncs;
                link_resyncs.read(resyncs, port_idx);
                link_resyncs.write(port_idx, resyncs + 1);
                link_rx_expected.write(port_idx, received + 1);
            }
            hdr.ethernet.ether_type = hdr.link_seq.next_type;
            hdr.link_seq.setInvalid();
            meta.len_delta = meta.len_delta - 6;
        }

        if (standard_metadata.parser_error != error.NoError) {
            if (hdr.udp.isValid() && hdr.udp.dst_port == INT_UDP_PORT) {
                int_events.count(EV_BAD_SHIM_TRUNCATED);
                drop_packet(DROP_INT_MALFORMED);
            } else {
                drop_packet(DROP_PARSER_ERROR);
            }
        } else if (standard_metadata.checksum_error == 1) {
            drop_packet(DROP_CHECKSUM);
        } else if (hdr.arp.isValid()) {
            if (hdr.arp.oper == 1 && hdr.arp.htype == 1 && hdr.arp.ptype == ETHERTYPE_IPV4
                    && hdr.arp.hlen == 6 && hdr.arp.plen == 4) {
                arp_proxy.apply();
            } else {
                drop_packet(DROP_ARP);
            }
        } else if (!hdr.ipv4.isValid()) {
            drop_packet(DROP_NOT_IP);
        } else if (hdr.ipv4.version != 4 || hdr.ipv4.ihl != 5 || hdr.ipv4.total_len < 20
                   || (bit<32>)hdr.ipv4.total_len + 14
                      > standard_metadata.packet_length + meta.len_delta) {
            drop_packet(DROP_IPV4_MALFORMED);
        } else if (hdr.ipv4.ttl <= 1) {
            drop_packet(DROP_TTL);
        } else {
            /* What the received INT header allows this switch to do. */
            if (hdr.ipv4.flags[0:0] == 1) {
                meta.no_int = 1;
                if (hdr.udp.isValid()) {
                    int_events.count(EV_FRAGMENT);
                }
            }
            if (hdr.int_shim.isValid()) {
                bit<16> int_bytes = ((bit<16>)hdr.int_shim.len << 2) + 4;
                if (meta.no_int == 1) {
                    meta.int_state = INT_STATE_OPAQUE;
                } else if (hdr.int_shim.int_type != INT_SHIM_TYPE_MD
                           || hdr.int_shim.npt != INT_SHIM_NPT_UDP) {
                    meta.int_state = INT_STATE_OPAQUE;
                    int_events.count(EV_UNSUPPORTED_TYPE);
                } else if (!hdr.int_md.isValid()) {
                    int_events.count(EV_BAD_SHIM_LEN);
                    drop_packet(DROP_INT_MALFORMED);
                } else if (hdr.int_md.ver != INT_MD_VERSION) {
                    meta.int_state = INT_STATE_OPAQUE;
                    int_events.count(EV_BAD_VERSION);
                } else if (hdr.udp.length != hdr.ipv4.total_len - 20
                           || hdr.udp.length < int_bytes + 8) {
                    int_events.count(EV_BAD_SHIM_LEN);
                    drop_packet(DROP_INT_MALFORMED);
                } else {
                    bit<16> inst = hdr.int_md.instruction_bitmap;
                    bit<16> ds = 0;
                    if (hdr.int_md.ds_id == INT_DS_ID_HPCC) {
                        ds = hdr.int_md.ds_instruction;
                    }
                    if ((inst & ~((bit<16>)INT_SUPPORTED_INSTRUCTIONS)) != 0
                            || (ds & ~((bit<16>)INT_SUPPORTED_DS_INSTRUCTIONS)) != 0
                            || hdr.int_md.hop_ml == 0
                            || hdr.int_md.hop_ml != hop_words(inst, ds)) {
                        meta.int_state = INT_STATE_NO_PUSH;
                        int_events.count(EV_BAD_HOP_ML);
                    } else {
                        meta.int_state = INT_STATE_VALID;
                    }
                }
            }

            if (meta.dropped == 0) {
                ipv4_lpm.apply();
            }
            if (meta.dropped == 0) {
                if (hdr.udp.isValid() && !hdr.int_shim.isValid() && meta.no_int == 0
#ifndef INT_WATCH_ANY_UDP
                        && hdr.udp.dst_port == ROCEV2_UDP_PORT
#endif
                        ) {
                    if (int_watchlist.apply().hit) {
                        meta.src_hop_ml = hop_words(meta.src_instruction,
                                                    meta.src_ds_instruction);
                    }
                }
                int_sink.apply();
                if (meta.sink_mode == SINK_REPORT
                        && (meta.int_state == INT_STATE_VALID
                            || (meta.int_state == INT_STATE_NONE && meta.int_source == 1))) {
                    report_sampling.apply();
                    bit<32> candidate;
                    report_candidates.read(candidate, 0);
                    report_candidates.write(0, candidate + 1);
                    if ((candidate & meta.report_mask) == 0) {
                        meta.rpt_ingress_port = standard_metadata.ingress_port;
                        meta.rpt_egress_port = standard_metadata.egress_spec;
                        meta.rpt_ingress_ts = standard_metadata.ingress_global_timestamp;
                        clone_preserving_field_list(CloneType.I2E, REPORT_CLONE_SESSION,
                                                    FL_REPORT);
                    } else {
                        int_events.count(EV_REPORT_SAMPLED_OUT);
                    }
                }
            }
        }

        /* Bytes enqueued per port (saturating); egress subtracts what it
         * dequeues and bounds the rest by the queue depth. */
        if (meta.dropped == 0) {
            bit<32> out_idx = (bit<32>)standard_metadata.egress_spec;
            bit<32> queued;
            queue_bytes.read(queued, out_idx);
            queue_bytes.write(out_idx, queued |+| standard_metadata.packet_length);
        }
    }
}

#endif  /* INT_ROCEV2_INGRESS_P4_ */
