// Indirect tables on both targets: an action_selector (crc16 over three selector keys,
// 14-bit hash) with a direct counter and a switch on its action_run, a named
// action_profile behind a ternary table, and a crc32 selector; what each did is written
// into the frame (the eBPF target's action profile tests).
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header s_t {
    bit<8>  k;      // the exact / ternary key
    bit<32> a;      // selector keys
    bit<16> b;
    bit<8>  c;
    bit<8>  mark;   // written by pick's member
    bit<8>  tag;    // written by mark's member
    bit<8>  tag32;  // written by pick32's member
    bit<16> run;    // pick's action_run
}
struct headers { ethernet_t eth; s_t s; }
struct meta_t { }

parser P(packet_in pk, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.eth); pk.extract(hdr.s); transition accept; }
}
control V(inout headers hdr, inout meta_t m) { apply { } }
control I(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action_profile(32) marks;
    action_selector(HashAlgorithm.crc16, 32w64, 32w14) pick_sel;
    action_selector(HashAlgorithm.crc32, 32w16, 32w8) pick32_sel;
    direct_counter(CounterType.packets_and_bytes) pick_hits;
    action to_port(bit<9> port, bit<8> mark) { sm.egress_spec = port; hdr.s.mark = mark; }
    action drop() { mark_to_drop(sm); }
    action tag(bit<8> v) { hdr.s.tag = v; }
    action tag32(bit<8> v) { hdr.s.tag32 = v; }
    table pick {
        key = { hdr.s.k: exact; hdr.s.a: selector; hdr.s.b: selector; hdr.s.c: selector; }
        actions = { to_port; drop; }
        implementation = pick_sel;
        counters = pick_hits;
        size = 64;
    }
    table mark {
        key = { hdr.s.k: ternary; }
        actions = { tag; NoAction; }
        implementation = marks;
        size = 32;
    }
    table pick32 {
        key = { hdr.s.c: exact; hdr.s.a: selector; }
        actions = { tag32; NoAction; }
        implementation = pick32_sel;
        size = 16;
    }
    apply {
        sm.egress_spec = 1;
        switch (pick.apply().action_run) {
            to_port: { hdr.s.run = 0x1111; }
            drop: { hdr.s.run = 0x2222; }
            default: { hdr.s.run = 0x3333; }
        }
        mark.apply();
        pick32.apply();
    }
}
control E(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t m) { apply { } }
control D(packet_out pk, in headers hdr) { apply { pk.emit(hdr.eth); pk.emit(hdr.s); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
