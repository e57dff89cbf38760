// Checksums over a varbit field and the payload (verify/update_checksum_with_payload
// and IPv4/TCP options), for the differential test (test_ebpf_features.py).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
    varbit<320> options;
}
header tcp_t {
    bit<16> sport; bit<16> dport; bit<32> seq; bit<32> ack; bit<4> off; bit<4> res;
    bit<8> flags; bit<16> window; bit<16> csum; bit<16> urg;
    varbit<320> options;
}
header udp_t { bit<16> sport; bit<16> dport; bit<16> len; bit<16> csum; }
header res_t { bit<8> errors; }
struct headers { ethernet_t eth; ipv4_t ip; tcp_t tcp; udp_t udp; res_t r; }
struct meta_t { bit<16> l4len; }

parser P(packet_in pkt, out headers h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) { 0x0800: ip; default: accept; }
    }
    state ip {
        bit<8> vi = pkt.lookahead<bit<8>>();
        pkt.extract(h.ip, ((bit<32>)vi[3:0] - 5) * 32);
        m.l4len = h.ip.len - (bit<16>)h.ip.ihl * 4;
        transition select(h.ip.proto) { 6: tcp; 17: udp; default: accept; }
    }
    state tcp {
        bit<104> head = pkt.lookahead<bit<104>>();
        pkt.extract(h.tcp, ((bit<32>)head[7:4] - 5) * 32);
        transition accept;
    }
    state udp { pkt.extract(h.udp); transition accept; }
}

control V(inout headers h, inout meta_t m) {
    apply {
        verify_checksum(h.ip.isValid(), { h.ip.version, h.ip.ihl, h.ip.tos, h.ip.len, h.ip.id,
            h.ip.flags, h.ip.frag, h.ip.ttl, h.ip.proto, h.ip.src, h.ip.dst, h.ip.options },
            h.ip.csum, HashAlgorithm.csum16);
        verify_checksum_with_payload(h.udp.isValid(), { h.ip.src, h.ip.dst, 8w0, h.ip.proto,
            m.l4len, h.udp.sport, h.udp.dport, h.udp.len }, h.udp.csum, HashAlgorithm.csum16);
        verify_checksum_with_payload(h.tcp.isValid(), { h.ip.src, h.ip.dst, 8w0, h.ip.proto,
            m.l4len, h.tcp.sport, h.tcp.dport, h.tcp.seq, h.tcp.ack, h.tcp.off, h.tcp.res,
            h.tcp.flags, h.tcp.window, h.tcp.urg, h.tcp.options }, h.tcp.csum, HashAlgorithm.csum16);
    }
}

control I(inout headers h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.r.setValid();
        h.r.errors = (bit<8>)sm.checksum_error;
        if (h.ip.isValid()) { h.ip.ttl = h.ip.ttl - 1; h.ip.src = h.ip.src + 1; }
        if (h.udp.isValid()) { h.udp.sport = h.udp.sport + 7; }
        if (h.tcp.isValid()) { h.tcp.window = h.tcp.window ^ 0x5555; }
    }
}

control E(inout headers h, inout meta_t m, inout standard_metadata_t sm) { apply { } }

control C(inout headers h, inout meta_t m) {
    apply {
        update_checksum(h.ip.isValid(), { h.ip.version, h.ip.ihl, h.ip.tos, h.ip.len, h.ip.id,
            h.ip.flags, h.ip.frag, h.ip.ttl, h.ip.proto, h.ip.src, h.ip.dst, h.ip.options },
            h.ip.csum, HashAlgorithm.csum16);
        update_checksum_with_payload(h.udp.isValid(), { h.ip.src, h.ip.dst, 8w0, h.ip.proto,
            m.l4len, h.udp.sport, h.udp.dport, h.udp.len }, h.udp.csum, HashAlgorithm.csum16);
        update_checksum_with_payload(h.tcp.isValid(), { h.ip.src, h.ip.dst, 8w0, h.ip.proto,
            m.l4len, h.tcp.sport, h.tcp.dport, h.tcp.seq, h.tcp.ack, h.tcp.off, h.tcp.res,
            h.tcp.flags, h.tcp.window, h.tcp.urg, h.tcp.options }, h.tcp.csum, HashAlgorithm.csum16);
    }
}

control D(packet_out pkt, in headers h) {
    apply { pkt.emit(h.eth); pkt.emit(h.r); pkt.emit(h.ip); pkt.emit(h.tcp); pkt.emit(h.udp); }
}

V1Switch(P(), V(), I(), E(), C(), D()) main;
