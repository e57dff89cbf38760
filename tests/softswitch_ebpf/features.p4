// The constructs the eBPF target learned to run after its first release (signed types,
// out/inout parameters of actions and functions, exit inside functions, header
// initialisers, run-time stack indexes, header and stack comparison, functions that
// return headers, controls with constructor arguments), for the differential test
// (test_ebpf_features.py): the same random entries and packets on both targets.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header data_t {
    bit<8>  op;
    int<8>  a;
    int<8>  b;
    bit<8>  sh;
    int<16> c;
    bit<8>  idx;
    bit<8>  key;
}
header elem_t { bit<8> v; }
header res_t {
    int<8>  sum;
    int<8>  diff;
    int<8>  prod;
    int<8>  sat_add;
    int<8>  sat_sub;
    int<8>  shr;
    int<8>  shr_var;
    int<8>  quot;
    bit<8>  flags;
    bit<16> widened;
    int<16> sext;
    int<16> c_shr;
    int<16> c_sat;
    bit<8>  picked;
    bit<8>  fn_out;
    bit<8>  ctl;
    bit<8>  act;
}
struct headers { ethernet_t eth; data_t d; elem_t[4] s; res_t r; }
struct meta_t { bit<8> scratch; }

parser P(packet_in pkt, out headers h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) { 0x88b6: data; default: accept; }
    }
    state data {
        pkt.extract(h.d);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        pkt.extract(h.s.next);
        transition accept;
    }
}

control NoVerify(inout headers h, inout meta_t m) { apply { } }

// out and inout parameters bound to one field: copy-in/copy-out in parameter order
bit<8> both(inout bit<8> x, out bit<8> y) {
    if (x <= 100) {
        y = 12;
        if (x <= 25) { y = 77; }
        return x + 1;
    }
    y = x;
    return 0;
}

bit<8> leave_if(in bit<8> v) {
    if (v == 0xEE) { exit; }
    return v ^ 0x5A;
}

elem_t make_elem(bit<8> v) {
    return { v + 3 };
}

control Scale(inout bit<8> x)(bit<8> factor) {
    apply { x = x * factor; }
}

control Twice(inout bit<8> x)(Scale inner) {
    apply { inner.apply(x); inner.apply(x); }
}

control I(inout headers h, inout meta_t m, inout standard_metadata_t sm) {
    register<int<16>>(8) last_c;
    counter(8, CounterType.packets) hits;
    Scale(3) by3;
    Twice(by3) by9;

    action bump(inout bit<8> v, bit<8> amount) {
        v = v + amount;
        if (amount == 0xFF) { exit; }
    }
    action set_out(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table route {
        key = { h.d.key: exact; }
        actions = { set_out; drop; bump(h.r.act); }
        default_action = set_out(1);
        size = 128;
    }

    apply {
        if (!h.d.isValid()) { sm.egress_spec = 2; exit; }
        h.r = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
        h.r.sum = h.d.a + h.d.b;
        h.r.diff = h.d.a - h.d.b;
        h.r.prod = h.d.a * h.d.b;
        h.r.sat_add = h.d.a |+| h.d.b;
        h.r.sat_sub = h.d.a |-| h.d.b;
        h.r.shr = h.d.a >> 3;
        h.r.shr_var = h.d.a >> h.d.sh;
        if (h.d.b != 0) { h.r.quot = h.d.a / (h.d.b == -128 ? (int<8>)1 : h.d.b); }
        h.r.flags = ((bit<1>)(h.d.a < h.d.b) ++ 7w0)
                  | ((h.d.a >= -5) ? 8w0x40 : 8w0)
                  | ((h.d.c > 0) ? 8w0x20 : 8w0)
                  | ((h.s[0] == h.s[1]) ? 8w0x10 : 8w0);
        h.r.widened = (bit<16>)(int<16>)h.d.a;
        h.r.sext = (int<16>)h.d.a + h.d.c;
        h.r.c_shr = h.d.c >> h.d.sh;
        h.r.c_sat = h.d.c |+| 16s30000;
        // a stack index known only at run time: reads past the end see zeros, writes vanish
        h.r.picked = h.s[h.d.idx].v;
        h.s[h.d.idx & 7].v = h.s[h.d.idx & 7].v + 1;
        bit<8> t = h.d.op;
        h.r.fn_out = both(t, t);
        h.r.fn_out = h.r.fn_out ^ t;
        h.s[1] = make_elem(h.s[1].v);
        h.r.fn_out = h.r.fn_out + leave_if(h.d.op);
        h.r.ctl = h.d.op;
        by9.apply(h.r.ctl);
        last_c.write((bit<32>)h.d.key & 7, h.d.c);
        hits.count((bit<32>)h.d.key & 7);
        h.r.act = h.d.op;
        bump(h.r.act, h.d.key);
        route.apply();
    }
}

control E(inout headers h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers h, inout meta_t m) { apply { } }

control D(packet_out pkt, in headers h) {
    apply { pkt.emit(h.eth); pkt.emit(h.d); pkt.emit(h.s); pkt.emit(h.r); }
}

V1Switch(P(), NoVerify(), I(), E(), NoUpdate(), D()) main;
