// Header unions (also a stack of them, extracted into with .next.member),
// packet.advance, nested structs emitted whole and tuple locals, for the differential
// test (test_ebpf_features.py): the same random packets on both targets.
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header tag_t { bit<8> kind; bit<8> skip; }
header a_t { bit<16> x; }
header b_t { bit<32> y; }
header_union ab_t { a_t a; b_t b; }
header out_t { bit<8> valid_bits; bit<8> same; }
struct inner_t { tag_t tag; ab_t u; }
header sel_t { bit<8> s; }
struct headers { ethernet_t eth; inner_t inr; ab_t u2; out_t o; sel_t[4] sels; ab_t[3] us; }
struct meta_t { }

parser P(packet_in pkt, out headers h, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) { 0x88b7: tag; default: accept; }
    }
    state tag {
        pkt.extract(h.inr.tag);
        pkt.advance((bit<32>)h.inr.tag.skip * 8);
        transition select(h.inr.tag.kind) { 1: a; 2: b; 3: both; 4: ustack; default: accept; }
    }
    // a selector, then that member of the next union of the stack, until a selector
    // says stop (a fourth union: StackOutOfBounds)
    state ustack {
        pkt.extract(h.sels.next);
        transition select(h.sels.last.s) { 1: ua; 2: ub; default: accept; }
    }
    state ua { pkt.extract(h.us.next.a); transition ustack; }
    state ub { pkt.extract(h.us.next.b); transition ustack; }
    state a { pkt.extract(h.inr.u.a); transition accept; }
    state b { pkt.extract(h.inr.u.b); transition accept; }
    state both { pkt.extract(h.inr.u.a); pkt.advance(16); pkt.extract(h.inr.u.b); transition accept; }
}

control NoVerify(inout headers h, inout meta_t m) { apply { } }

bit<8> bump8(inout bit<8> x) { x = x + 3; return x; }

control I(inout headers h, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        h.o.setValid();
        if (h.inr.tag.isValid() && h.inr.tag.skip == 0xFF) { mark_to_drop(sm); exit; }
        h.u2 = h.inr.u;
        if (h.inr.u.a.isValid() && h.inr.u.a.x[0:0] == 1) {
            h.u2.b.setValid();                // the union's other member goes invalid
            h.u2.b.y = (bit<32>)h.inr.u.a.x;
        } else if (h.inr.u.b.isValid() && h.inr.u.b.y[1:1] == 1) {
            h.u2.a.setValid();
            h.u2.a.x = h.inr.u.b.y[15:0];
        } else if (h.inr.u.b.isValid()) {
            h.u2.b.setInvalid();
        }
        h.o.valid_bits = (bit<1>)h.inr.u.isValid() ++ (bit<1>)h.inr.u.a.isValid()
                         ++ (bit<1>)h.inr.u.b.isValid() ++ (bit<1>)h.u2.isValid()
                         ++ (bit<1>)h.u2.a.isValid() ++ (bit<1>)h.u2.b.isValid() ++ 2w0;
        h.o.same = (h.u2 == h.inr.u) ? 8w1 : 8w0;
        // a tuple local: its initialiser's calls run (their effects are what shows)
        tuple<bit<8>, bit<8>> pair = { h.o.valid_bits, bump8(h.o.same) };
        pair = { bump8(h.o.valid_bits), h.o.same };
    }
}

control E(inout headers h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control NoUpdate(inout headers h, inout meta_t m) { apply { } }
control D(packet_out pkt, in headers h) { apply { pkt.emit(h); } }

V1Switch(P(), NoVerify(), I(), E(), NoUpdate(), D()) main;
