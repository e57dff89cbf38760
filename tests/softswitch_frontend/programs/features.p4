// Exercises most of the P4_16 language the front end supports.
#include <core.p4>
#include <v1model.p4>

#define TABLE_SIZE 1024
const bit<16> TYPE_IPV4 = 0x800;
const bit<16> TYPE_SR = 0x1234;
const int SHIFT = 3;
typedef bit<32> ip4Addr_t;
type bit<48> mac_t;

enum Color { Red, Green, Blue }
enum bit<8> Proto { TCP = 6, UDP = 17 }
error { BadVersion }

@controller_header("packet_in")
header packet_in_h { bit<9> ingress_port; bit<7> _pad; }
@controller_header("packet_out")
header packet_out_h { bit<9> egress_port; bit<7> _pad; }

header ethernet_t { mac_t dstAddr; mac_t srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;
    bit<16> identification; bit<3> flags; bit<13> fragOffset;
    bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    ip4Addr_t srcAddr; ip4Addr_t dstAddr;
}
header ipv4_opt_t { varbit<320> options; }
header sr_t { bit<1> bos; bit<15> port; }
header a_t { bit<8> x; }
header b_t { bit<16> y; }
header_union ab_t { a_t a; b_t b; }

struct headers_t {
    packet_out_h pkt_out;
    packet_in_h pkt_in;
    ethernet_t ethernet;
    sr_t[4] sr;
    ipv4_t ipv4;
    ipv4_opt_t ipv4_opt;
    ab_t u;
}
struct learn_t { mac_t src; bit<9> port; }
struct meta_t {
    @field_list(1) bit<8> tag;
    bit<32> hash_val;
    bit<2> color;
    bool flag;
    Color c;
    int<8> signed_v;
}

parser SubP(packet_in pkt, inout headers_t hdr) {
    state start { pkt.extract(hdr.ipv4); transition accept; }
}

parser MyParser(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    value_set<bit<16>>(4) custom_types;
    SubP() sub;
    state start {
        transition select(sm.ingress_port) {
            9w64: parse_pkt_out;
            default: parse_ethernet;
        }
    }
    state parse_pkt_out { pkt.extract(hdr.pkt_out); transition parse_ethernet; }
    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            TYPE_IPV4: parse_ipv4;
            TYPE_SR: parse_sr;
            0x9000 .. 0x90FF: accept;
            0xA000 &&& 0xF000: accept;
            custom_types: accept;
            default: accept;
        }
    }
    state parse_sr {
        pkt.extract(hdr.sr.next);
        transition select(hdr.sr.last.bos) { 1: parse_ipv4; default: parse_sr; }
    }
    state parse_ipv4 {
        sub.apply(pkt, hdr);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        pkt.extract(hdr.ipv4_opt, (bit<32>) (((bit<16>) hdr.ipv4.ihl - 5) * 32));
        transition select(hdr.ipv4.protocol, hdr.ipv4.ttl) {
            (Proto.TCP, _): accept;
            (8w17, 0 .. 10): accept;
            default: accept;
        }
    }
}

control MyVerifyChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control Sub(inout meta_t meta)(bit<8> amount) {
    apply { meta.tag = meta.tag |+| amount; }
}

bit<8> double(in bit<8> v) { return v << 1; }

control MyIngress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(TABLE_SIZE, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets) lpm_counter;
    meter(32w16, MeterType.bytes) port_meter;
    direct_meter<bit<2>>(MeterType.packets) lpm_meter;
    register<bit<32>>(32w64) reg;
    Sub(8w2) sub;
    bit<8> tmp = 0;

    action drop() { mark_to_drop(sm); }
    action set_port(bit<9> port, mac_t dmac) {
        sm.egress_spec = port;
        hdr.ethernet.dstAddr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        lpm_counter.count();
        lpm_meter.read(meta.color);
    }
    action set_tag(inout bit<8> t, bit<8> v) { t = v; }
    action to_cpu() {
        sm.egress_spec = 64;
        hdr.pkt_in.setValid();
        hdr.pkt_in.ingress_port = sm.ingress_port;
    }

    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm @name("dst"); }
        actions = { set_port; drop; NoAction; }
        default_action = drop();
        size = TABLE_SIZE;
        counters = lpm_counter;
        meters = lpm_meter;
    }
    table acl {
        key = {
            hdr.ethernet.etherType: ternary;
            hdr.ipv4.protocol: range;
            hdr.ipv4.ttl: optional;
            sm.ingress_port: exact;
        }
        actions = { to_cpu; drop; set_tag(meta.tag); }
        const default_action = drop;
        const entries = {
            (0x0800 &&& 0xFFFF, 6 .. 17, 64, 1): to_cpu();
            priority = 10: (_, _, _, 2): set_tag(meta.tag, 7);
            @priority(5) (0x86DD, 0 .. 255, _, 3): drop();
        }
    }

    apply {
        port_counter.count((bit<32>) sm.ingress_port);
        port_meter.execute_meter((bit<32>) sm.ingress_port, meta.color);
        if (hdr.ipv4.isValid() && !meta.flag) {
            switch (ipv4_lpm.apply().action_run) {
                set_port: { tmp = 1; }
                drop: { exit; }
                default: { }
            }
        }
        if (acl.apply().hit) { tmp = tmp + 1; } else if (acl.apply().miss) { tmp = 3; }
        bit<32> old;
        reg.read(old, 32w3);
        reg.write(3, old + 1);
        hash(meta.hash_val, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol }, 32w65536);
        meta.tag = double(tmp);
        meta.tag = hdr.ipv4.srcAddr[7:0] ^ (bit<8>) hdr.ipv4.ttl;
        bit<16> cat = meta.tag ++ tmp;
        bit<24> cat3 = cat ++ 8w1;
        meta.hash_val = (bit<32>) cat3 + (bit<32>) (cat >> SHIFT) + (1 << SHIFT);
        meta.signed_v = -8s1;
        bit<48> raw_mac = (bit<48>) hdr.ethernet.srcAddr;
        hdr.ethernet.dstAddr = (mac_t) (raw_mac + 1);
        meta.flag = meta.tag > 5 ? true : false;
        tmp = meta.flag ? 8w1 : 2;
        meta.c = Color.Green;
        switch (meta.tag) { 1: { tmp = 0; } 2: 3: { tmp = 1; } default: { } }
        if (hdr.u.a.isValid()) { hdr.u.b.setValid(); }
        hdr.sr.push_front(1);
        hdr.sr[0].setValid();
        hdr.sr[0].port = (bit<15>) hdr.sr.lastIndex;
        hdr.sr.pop_front(2);
        random(meta.tag, 8w0, 8w255);
        digest<learn_t>(1, { hdr.ethernet.srcAddr, sm.ingress_port });
        digest(1, (learn_t) { src = hdr.ethernet.srcAddr, port = sm.ingress_port });
        sub.apply(meta);
        meta.signed_v = (int<8>) meta.tag |-| 8s3;
        log_msg("tag={}", { meta.tag });
        log_msg("plain");
        clone_preserving_field_list(CloneType.I2E, 32w5, 1);
        truncate(32w64);
        assert(tmp != 9);
        if (sm.parser_error != error.NoError) { drop(); }
    }
}

control MyEgress(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        if (sm.enq_qdepth > 19w10) { hdr.ipv4.diffserv[1:0] = 3; }
        hdr.ipv4.identification = (bit<16>) sm.egress_global_timestamp[15:0];
    }
}

control MyComputeChecksum(inout headers_t hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.diffserv, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.pkt_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.sr);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv4_opt);
        pkt.emit(hdr.u);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
