/* Egress: per-port queue and tx state, INT source insertion, transit hop
 * push, sink strip, telemetry report encapsulation (for report clones),
 * RED-style ECN marking and the link sequence push on fabric ports.
 * Needs the top-level externs declared in int_rocev2.p4 (queue_bytes,
 * drop_reasons, int_events).
 */
#ifndef INT_ROCEV2_EGRESS_P4_
#define INT_ROCEV2_EGRESS_P4_

#include "defines.p4"
#include "headers.p4"
#include "metadata.p4"
#include "int_hop.p4"

control SwitchEgress(inout headers_t hdr, inout local_metadata_t meta,
                     inout standard_metadata_t standard_metadata) {

    counter(PORT_COUNT, CounterType.packets_and_bytes) egress_port_counter;
    counter(PORT_COUNT, CounterType.packets) ecn_marked;

    /* Bytes sent per egress port, modulo 2^32 (the HPCC tx bytes field). */
    register<bit<32>>(PORT_COUNT) tx_bytes;
    /* deq_qdepth of the last packet that left each port (for reports). */
    register<bit<24>>(PORT_COUNT) last_queue_occupancy;
    /* Hop latency (us) of the last packet that left each port (for reports). */
    register<bit<32>>(PORT_COUNT) last_hop_latency;
    /* Telemetry report sequence number per report destination (the clone
     * replica's egress_rid mod REPORT_DESTINATIONS; 22 bits used). */
    register<bit<32>>(REPORT_DESTINATIONS) report_seq;
    /* Link sequence number per fabric port: packets sent on it so far. */
    register<bit<32>>(PORT_COUNT) link_tx_seq;

    FillHop() fill_hop;
    FillHop() fill_report_md;

    /* ---- configuration tables */
    action set_switch_config(bit<32> node_id) {
        meta.node_id = node_id;
    }

    table switch_config {
        actions = { set_switch_config; }
        default_action = set_switch_config(0);
        size = 1;
    }

    action set_line_rate(bit<32> line_rate_mbps) {
        meta.line_rate_mbps = line_rate_mbps;
    }

    table port_line_rate {
        key = { meta.hop_port: exact @name("port"); }
        actions = { set_line_rate; NoAction; }
        default_action = NoAction();
        size = PORT_COUNT;
    }

    action set_mtu(bit<16> mtu) {
        meta.mtu = mtu;
    }

    table port_mtu {
        key = { standard_metadata.egress_port: exact @name("egress_port"); }
        actions = { set_mtu; }
        default_action = set_mtu(DEFAULT_PORT_MTU);
        size = PORT_COUNT;
    }

    action set_fabric() {
        meta.is_fabric = 1;
    }

    table fabric_port {
        key = { standard_metadata.egress_port: exact @name("egress_port"); }
        actions = { set_fabric; NoAction; }
        default_action = NoAction();
        size = PORT_COUNT;
    }

    action set_ecn_thresholds(bit<32> kmin_bytes, bit<32> kmax_bytes, bit<16> pmax) {
        meta.ecn_enabled = 1;
        meta.ecn_kmin_bytes = kmin_bytes;
        meta.ecn_kmax_bytes = kmax_bytes;
        meta.ecn_pmax = pmax;
    }

    table ecn_config {
        key = { standard_metadata.egress_port: exact @name("egress_port"); }
        actions = { set_ecn_thresholds; NoAction; }
        default_action = NoAction();
        size = PORT_COUNT;
    }

    action set_report_config(mac_addr_t switch_mac, mac_addr_t collector_mac,
                             ipv4_addr_t switch_ip, ipv4_addr_t collector_ip,
                             bit<16> collector_port, bit<16> payload_bytes,
                             bit<6> hw_id) {
        meta.report_enabled = 1;
        meta.report_src_mac = switch_mac;
        meta.report_dst_mac = collector_mac;
        meta.report_src_ip = switch_ip;
        meta.report_dst_ip = collector_ip;
        meta.report_dst_port = collector_port;
        meta.report_payload_bytes = payload_bytes;
        meta.report_hw_id = hw_id;
    }

    action report_disabled() {
        meta.report_enabled = 0;
    }

    table report_config {
        actions = { set_report_config; report_disabled; }
        default_action = report_disabled();
        size = 1;
    }

    /* Further report destinations: a report clone whose replica instance
     * (egress_rid) has an entry goes to that collector instead of
     * report_config's (which keeps the source, payload and hw_id). */
    action set_report_collector(mac_addr_t collector_mac, ipv4_addr_t collector_ip,
                                bit<16> collector_port) {
        meta.report_dst_mac = collector_mac;
        meta.report_dst_ip = collector_ip;
        meta.report_dst_port = collector_port;
    }

    table report_collector {
        key = { standard_metadata.egress_rid: exact @name("egress_rid"); }
        actions = { set_report_collector; NoAction; }
        default_action = NoAction();
        size = REPORT_DESTINATIONS;
    }

    /* ---- INT header edits */
    action int_insert() {
        hdr.int_shim.setValid();
        hdr.int_shim.int_type = INT_SHIM_TYPE_MD;
        hdr.int_shim.npt = INT_SHIM_NPT_UDP;
        hdr.int_shim.rsvd = 0;
        hdr.int_shim.len = INT_MD_WORDS;
        hdr.int_shim.udp_dport = hdr.udp.dst_port;
        hdr.int_md.setValid();
        hdr.int_md.ver = INT_MD_VERSION;
        hdr.int_md.d = 0;
        hdr.int_md.e = 0;
        hdr.int_md.m = 0;
        hdr.int_md.rsvd = 0;
        hdr.int_md.hop_ml = meta.src_hop_ml;
        hdr.int_md.remaining_hop_cnt = meta.src_max_hops;
        hdr.int_md.instruction_bitmap = meta.src_instruction;
        hdr.int_md.ds_id = INT_DS_ID_HPCC;
        hdr.int_md.ds_instruction = meta.src_ds_instruction;
        hdr.int_md.ds_flags = 0;
        hdr.udp.dst_port = INT_UDP_PORT;
        hdr.udp.length = hdr.udp.length + INT_FIXED_BYTES;
        hdr.ipv4.total_len = hdr.ipv4.total_len + INT_FIXED_BYTES;
        meta.len_delta = meta.len_delta + INT_FIXED_BYTES;
    }

    action int_grow(bit<16> hop_bytes) {
        hdr.int_shim.len = hdr.int_shim.len + (bit<8>)hdr.int_md.hop_ml;
        hdr.int_md.remaining_hop_cnt = hdr.int_md.remaining_hop_cnt - 1;
        hdr.udp.length = hdr.udp.length + hop_bytes;
        hdr.ipv4.total_len = hdr.ipv4.total_len + hop_bytes;
        meta.len_delta = meta.len_delta + (bit<32>)hop_bytes;
    }

    action int_strip() {
        bit<16> int_bytes = ((bit<16>)hdr.int_shim.len << 2) + 4;
        hdr.udp.dst_port = hdr.int_shim.udp_dport;
        hdr.udp.length = hdr.udp.length - int_bytes;
        hdr.ipv4.total_len = hdr.ipv4.total_len - int_bytes;
        meta.len_delta = meta.len_delta - (bit<32>)int_bytes;
        hdr.int_shim.setInvalid();
        hdr.int_md.setInvalid();
        hdr.int_stack.setInvalid();
    }

    apply {
        bool is_report = standard_metadata.instance_type == INSTANCE_TYPE_I2E_CLONE;
        bit<32> eport = (bit<32>)standard_metadata.egress_port;

        switch_config.apply();
        if (is_report) {
            meta.hop_port = meta.rpt_egress_port;
        } else {
            meta.hop_port = standard_metadata.egress_port;
        }
        port_line_rate.apply();
        port_mtu.apply();
        fabric_port.apply();
        ecn_config.apply();
        bit<16> fabric_bytes = 0;
        if (meta.is_fabric == 1) {
            fabric_bytes = 6;
        }

        /* Queue and tx state: a normal packet updates its port's; a report
         * clone reads the state of the port its original left by. */
        tx_bytes.read(meta.tx_bytes_before, eport);
        if (is_report) {
            bit<32> hport = (bit<32>)meta.hop_port;
            queue_bytes.read(meta.queue_bytes, hport);
            last_queue_occupancy.read(meta.queue_occupancy, hport);
            tx_bytes.read(meta.hop_tx_bytes, hport);
        } else {
            /* Bytes still queued behind this packet. v1model reports no
             * traffic manager drops, so bytes ingress added for a tail-dropped
             * packet are never subtracted here; bound the value by what the
             * deq_qdepth packets behind this one can hold (a frame is counted
             * as received: at most MTU + 14 Ethernet + 6 link sequence bytes).
             * deq_qdepth 0 gives 0: the queue is empty, the value is exact. */
            bit<32> queued;
            queue_bytes.read(queued, eport);
            queued = queued |-| standard_metadata.packet_length;
            bit<64> queue_cap = (bit<64>)standard_metadata.deq_qdepth
                                * ((bit<64>)meta.mtu + QUEUE_FRAME_OVERHEAD);
            if ((bit<64>)queued > queue_cap) {
                queued = (bit<32>)queue_cap;
            }
            queue_bytes.write(eport, queued);
            /* Packets queued but none counted: a target that runs egress when
             * the packet is queued, not when it leaves (softswitch's eBPF
             * target), so ingress's count went out with it. The bytes the port
             * sends while this packet waits stand in: deq_timedelta (us) x the
             * port's line rate (Mbit/s) / 8, the queue ahead of it as it
             * arrived (p4/README.md, "Queue bytes"). Without a line rate, the
             * depth of packets like this one. A traffic manager that runs
             * egress at dequeue never gets here: what is behind a packet
             * passed ingress before it left. */
            if (queued == 0 && standard_metadata.deq_qdepth != 0) {
                bit<64> ahead = ((bit<64>)standard_metadata.deq_timedelta
                                 * (bit<64>)meta.line_rate_mbps) >> 3;
                if (meta.line_rate_mbps == 0) {
                    ahead = (bit<64>)standard_metadata.deq_qdepth
                            * (bit<64>)standard_metadata.packet_length;
                }
                if (ahead > 0xFFFFFFFF) {
                    ahead = 0xFFFFFFFF;
                }
                queued = (bit<32>)ahead;
            }
            meta.queue_bytes = queued;
            meta.queue_occupancy = (bit<24>)standard_metadata.deq_qdepth;
            last_queue_occupancy.write(eport, meta.queue_occupancy);
            meta.hop_tx_bytes = meta.tx_bytes_before;
        }

        /* A report clone is parsed again from the received bytes: the link
         * sequence header of the previous link must not leave. */
        if (hdr.link_seq.isValid()) {
            hdr.ethernet.ether_type = hdr.link_seq.next_type;
            hdr.link_seq.setInvalid();
        }

        hop_values_t v;
        bit<48> in_ts;
        v.node_id = meta.node_id;
        if (is_report) {
            v.ingress_port = (bit<16>)meta.rpt_ingress_port;
            v.egress_port = (bit<16>)meta.rpt_egress_port;
            in_ts = meta.rpt_ingress_ts;
        } else {
            v.ingress_port = (bit<16>)standard_metadata.ingress_port;
            v.egress_port = (bit<16>)standard_metadata.egress_port;
            in_ts = standard_metadata.ingress_global_timestamp;
        }
        if (is_report) {
            last_hop_latency.read(v.hop_latency, (bit<32>)meta.hop_port);
        } else {
            v.hop_latency = (bit<32>)(standard_metadata.egress_global_timestamp - in_ts);
            last_hop_latency.write(eport, v.hop_latency);
        }
        v.queue_occupancy = meta.queue_occupancy;
        v.ingress_ts = (bit<64>)in_ts;
        v.egress_ts = (bit<64>)standard_metadata.egress_global_timestamp;
        v.tx_bytes = meta.hop_tx_bytes;
        v.queue_bytes = meta.queue_bytes;
        v.line_rate = meta.line_rate_mbps;

        bit<32> out_len = standard_metadata.packet_length;

        if (is_report) {
            /* ---- Telemetry Report v2.0 around the packet as received. */
            report_config.apply();
            if (meta.report_enabled == 1) {
                report_collector.apply();
            }
            if (!hdr.int_shim.isValid() && meta.int_source == 1) {
                int_insert();   /* source and sink on one switch */
            }
            if (meta.report_enabled == 0) {
                int_events.count(EV_REPORT_NO_COLLECTOR);
                drop_reasons.count(DROP_REPORT);
                mark_to_drop(standard_metadata);
                meta.dropped = 1;
            } else if (!hdr.int_md.isValid()) {
                drop_reasons.count(DROP_REPORT);
                mark_to_drop(standard_metadata);
                meta.dropped = 1;
            } else {
                bit<16> ds = 0;
                if (hdr.int_md.ds_id == INT_DS_ID_HPCC) {
                    ds = hdr.int_md.ds_instruction & INT_SUPPORTED_DS_INSTRUCTIONS;
                }
                bit<16> rep_inst = hdr.int_md.instruction_bitmap & REPORT_MD_INSTRUCTION_MASK;
                bit<16> md_bytes = (bit<16>)hop_words(rep_inst, ds) << 2;
                bit<16> int_bytes = ((bit<16>)hdr.int_shim.len << 2) + 4;
                bit<16> payload = hdr.ipv4.total_len - 28 - int_bytes;
                bit<16> keep = meta.report_payload_bytes;
                if (payload < keep) {
                    keep = payload;
                }
                keep = keep & 0xFFFC;
                bit<16> inner = 28 + int_bytes + keep;
                bit<16> body = 8 + md_bytes + inner;
                if (body > 1020) {
                    int_events.count(EV_REPORT_TOO_LONG);
                    drop_reasons.count(DROP_REPORT);
                    mark_to_drop(standard_metadata);
                    meta.dropped = 1;
                } else {
                    fill_report_md.apply(hdr.report_md, v, rep_inst, ds);
                    bit<32> seq;
                    bit<32> dest = (bit<32>)(standard_metadata.egress_rid & (REPORT_DESTINATIONS - 1));
                    report_seq.read(seq, dest);
                    report_seq.write(dest, seq + 1);
                    bit<16> ip_total = 40 + body;

                    hdr.ethernet.dst_addr = meta.report_dst_mac;
                    hdr.ethernet.src_addr = meta.report_src_mac;
                    hdr.ethernet.ether_type = ETHERTYPE_IPV4;

                    hdr.report_ipv4.setValid();
                    hdr.report_ipv4.version = 4;
                    hdr.report_ipv4.ihl = 5;
                    hdr.report_ipv4.dscp = 0;
                    hdr.report_ipv4.ecn = 0;
                    hdr.report_ipv4.total_len = ip_total;
                    hdr.report_ipv4.identification = 0;
                    hdr.report_ipv4.flags = 0;
                    hdr.report_ipv4.frag_offset = 0;
                    hdr.report_ipv4.ttl = 64;
                    hdr.report_ipv4.protocol = IP_PROTO_UDP;
                    hdr.report_ipv4.hdr_checksum = 0;
                    hdr.report_ipv4.src_addr = meta.report_src_ip;
                    hdr.report_ipv4.dst_addr = meta.report_dst_ip;

                    hdr.report_udp.setValid();
                    hdr.report_udp.src_port = REPORT_UDP_SRC_PORT;
                    hdr.report_udp.dst_port = meta.report_dst_port;
                    hdr.report_udp.length = ip_total - 20;
                    hdr.report_udp.checksum = 0;

                    hdr.report_group.setValid();
                    hdr.report_group.ver = REPORT_VERSION;
                    hdr.report_group.hw_id = meta.report_hw_id;
                    hdr.report_group.seq = seq[21:0];
                    hdr.report_group.node_id = meta.node_id;

                    hdr.report_individual.setValid();
                    hdr.report_individual.rep_type = REPORT_TYPE_INT;
                    hdr.report_individual.in_type = REPORT_IN_TYPE_IPV4;
                    hdr.report_individual.rep_len = (bit<8>)(body >> 2);
                    hdr.report_individual.md_len = (bit<8>)(md_bytes >> 2);
                    hdr.report_individual.d = 0;
                    hdr.report_individual.q = 0;
                    hdr.report_individual.f = 1;
                    hdr.report_individual.i = 0;
                    hdr.report_individual.rsvd = 0;

                    hdr.report_main.setValid();
                    hdr.report_main.rep_md_bits = rep_inst;
                    hdr.report_main.ds_id = hdr.int_md.ds_id;
                    hdr.report_main.ds_md_bits = ds;
                    hdr.report_main.ds_md_status = 0;

                    out_len = 14 + (bit<32>)ip_total;
                    truncate(out_len + (bit<32>)fabric_bytes);
                    int_events.count(EV_REPORT_SENT);
                }
            }
        } else if (hdr.ipv4.isValid()) {
            if (meta.sink_mode == SINK_REPORT) {
                /* ---- Sink (report mode): the packet leaves as it entered
                 * the INT domain; the report clone carries the telemetry. */
                if (meta.int_state == INT_STATE_VALID || meta.int_state == INT_STATE_NO_PUSH) {
                    int_strip();
                    int_events.count(EV_SINK_STRIP);
                }
            } else {
                /* ---- Source */
                if (meta.int_source == 1 && meta.int_state == INT_STATE_NONE) {
                    bit<16> first_hop = 0;
                    if (meta.src_max_hops != 0) {
                        first_hop = (bit<16>)meta.src_hop_ml << 2;
                    }
                    if ((bit<32>)hdr.ipv4.total_len + INT_FIXED_BYTES + (bit<32>)first_hop
                            + (bit<32>)fabric_bytes > (bit<32>)meta.mtu) {
                        int_events.count(EV_MTU_SKIP_SOURCE);
                    } else {
                        int_insert();
                        meta.int_state = INT_STATE_VALID;
                        int_events.count(EV_SOURCE_INSERT);
                    }
                }
                /* ---- Transit (every switch on the path, source included) */
                if (meta.int_state == INT_STATE_VALID) {
                    bit<16> hop_bytes = (bit<16>)hdr.int_md.hop_ml << 2;
                    bit<16> ds = 0;
                    if (hdr.int_md.ds_id == INT_DS_ID_HPCC) {
                        ds = hdr.int_md.ds_instruction;
                    }
                    if (hdr.int_md.remaining_hop_cnt == 0) {
                        hdr.int_md.e = 1;
                        int_events.count(EV_HOP_EXHAUSTED);
                    } else if ((bit<16>)hdr.int_shim.len + (bit<16>)hdr.int_md.hop_ml
                               > INT_MAX_SHIM_LEN) {
                        hdr.int_md.e = 1;
                        int_events.count(EV_STACK_FULL);
                    } else if ((bit<32>)hdr.ipv4.total_len + (bit<32>)hop_bytes
                               + (bit<32>)fabric_bytes > (bit<32>)meta.mtu) {
                        hdr.int_md.m = 1;
                        int_events.count(EV_MTU_SKIP_TRANSIT);
                    } else {
                        fill_hop.apply(hdr.hop, v, hdr.int_md.instruction_bitmap, ds);
                        int_grow(hop_bytes);
                        int_events.count(EV_TRANSIT_PUSH);
                    }
                    if (meta.sink_mode == SINK_HOST) {
                        int_events.count(EV_SINK_HOST);
                    }
                }
            }

            /* ---- ECN marking (DCQCN baseline), RED-style on queue bytes:
             * probability 0 at Kmin rising to Pmax/65536 at Kmax, 1 above. */
            if (meta.ecn_enabled == 1 && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
                bool mark = false;
                if (meta.queue_bytes >= meta.ecn_kmax_bytes) {
                    mark = true;
                } else if (meta.queue_bytes > meta.ecn_kmin_bytes) {
                    bit<16> r;
                    random<bit<16>>(r, 0, 0xFFFF);
                    bit<64> lhs = (bit<64>)r
                                  * (bit<64>)(meta.ecn_kmax_bytes - meta.ecn_kmin_bytes);
                    bit<64> rhs = (bit<64>)meta.ecn_pmax
                                  * (bit<64>)(meta.queue_bytes - meta.ecn_kmin_bytes);
                    if (lhs < rhs) {
                        mark = true;
                    }
                }
                if (mark) {
                    hdr.ipv4.ecn = 3;
                    ecn_marked.count(eport);
                }
            }
            out_len = standard_metadata.packet_length + meta.len_delta;
        } else {
            out_len = standard_metadata.packet_length + meta.len_delta;
        }

        /* ---- Link sequence push on fabric ports: every packet sent counts. */
        if (meta.dropped == 0) {
            if (meta.is_fabric == 1) {
                bit<32> seq_out;
                link_tx_seq.read(seq_out, eport);
                link_tx_seq.write(eport, seq_out + 1);
                hdr.link_seq.setValid();
                hdr.link_seq.seq = seq_out;
                hdr.link_seq.next_type = hdr.ethernet.ether_type;
                hdr.ethernet.ether_type = ETHERTYPE_LINK_SEQ;
                out_len = out_len + 6;
            }
            tx_bytes.write(eport, meta.tx_bytes_before + out_len);
            egress_port_counter.count(eport);
        }
    }
}

#endif  /* INT_ROCEV2_EGRESS_P4_ */
