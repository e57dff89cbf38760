// An ACL over ternary, range, optional and exact keys with priorities, a direct
// counter, an exact table, slices, an indexed counter, a register, switch statements
// on action_run and on a value (with fall-through labels), a function, two instances
// of a sub-control with its own table each, for the eBPF target's differential test.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags;
    bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
header l4_t { bit<16> sport; bit<16> dport; }
struct headers { ethernet_t eth; ipv4_t ip; l4_t l4; }
struct meta_t { bit<8> cls; bit<16> mark; }

// a function with in, inout and header arguments and a return value
bit<8> weigh(in bit<8> proto, inout bit<16> mark, in ipv4_t ip, out bit<4> nibble) {
    bit<8> w = proto ^ ip.ttl;
    nibble = ip.tos[3:0];
    if (ip.ttl == 0) { return 0xEE; }
    mark = mark + (bit<16>)w;
    return w |+| 0x10;
}

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x0800: ip; 0x8100 &&& 0xefff: accept; default: accept; }
    }
    state ip {
        pk.extract(hdr.ip);
        transition select(hdr.ip.proto) { 6: l4; 17: l4; 0x80 .. 0x8f: l4; default: accept; }
    }
    state l4 { pk.extract(hdr.l4); transition accept; }
}

control V(inout headers hdr, inout meta_t m) { apply { } }

control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    direct_counter(CounterType.packets_and_bytes) acl_hits;
    counter(8, CounterType.packets_and_bytes) port_count;
    register<bit<16>>(8) last_dport;
    action deny() { mark_to_drop(sm); }
    action permit(bit<9> port, bit<8> cls) {
        sm.egress_spec = port;
        m.cls = cls;
        hdr.ip.tos[7:2] = cls[5:0];
    }
    action nop() { }
    table acl {
        key = {
            hdr.ip.src: ternary;
            hdr.ip.dst: ternary;
            hdr.l4.dport: range;
            hdr.ip.proto: optional;
            sm.ingress_port: exact;
        }
        actions = { deny; permit; nop; }
        default_action = deny();
        counters = acl_hits;
        size = 256;
    }
    action set_mark(bit<16> mark) { m.mark = mark; hdr.eth.src = hdr.eth.src ^ 48w1; }
    table by_class {
        key = { m.cls: exact; hdr.l4.isValid(): exact; }
        actions = { set_mark; NoAction; }
    }
    apply {
        port_count.count((bit<32>)sm.ingress_port + 5);    // ports 3 and up: out of range
        if (hdr.l4.isValid()) {
            bit<16> prev;
            last_dport.read(prev, (bit<32>)sm.ingress_port);
            last_dport.write((bit<32>)sm.ingress_port, hdr.l4.dport);
            hdr.ip.id = prev;
        }
        if (hdr.ip.isValid()) {
            switch (acl.apply().action_run) {
                permit: {
                    by_class.apply();
                    if (m.mark != 0) { hdr.ip.ttl = hdr.ip.ttl |-| 1; }
                }
                nop:
                deny: { hdr.ip.flags = 1; }
            }
            bit<4> nib;
            hdr.ip.proto = weigh(hdr.ip.proto, m.mark, hdr.ip, nib) ^ (bit<8>)nib;
            switch (hdr.ip.proto) {
                6: { hdr.ip.frag = 6; }
                17:
                0x85: { hdr.ip.frag = 17; }
                default: { hdr.ip.frag = 0; }
            }
        } else {
            sm.egress_spec = 1;
        }
    }
}

control Stamp(inout ethernet_t eth, in bit<8> cls, inout bit<16> mark) {
    action set(bit<48> v) { eth.src = v; mark = mark + 1; }
    table stamp { key = { cls: exact; } actions = { set; NoAction; } default_action = NoAction(); }
    apply { if (cls != 0) { stamp.apply(); } }
}

control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    Stamp() st;
    Stamp() st2;    // a second instance: its own table and function
    apply {
        if (sm.egress_port == 7) { hdr.eth.dst = 0; }
        st.apply(hdr.eth, m.cls, m.mark);
        st2.apply(hdr.eth, m.cls + 1, m.mark);
        hdr.ip.len = m.mark;
    }
}
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.eth); pk.emit(hdr.ip); pk.emit(hdr.l4); }
}
V1Switch(P(), V(), I(), E(), C(), D()) main;
