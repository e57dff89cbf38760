// Sub-controls are inlined before P4Info is written: an instance's actions and tables
// where it is declared (its constructor-argument controls' first), a direct
// invocation's after the control's own.
#include "common.p4"

control Inner(inout headers_t hdr, inout meta_t meta) {
    action in_table(bit<8> v) { hdr.a.v = v; }
    action in_apply(bit<8> v) { meta.m8 = v; }
    table it { key = { hdr.a.v: exact; } actions = { in_table; NoAction; } }
    apply { it.apply(); in_apply(8w1); }
}

control InnerT(inout headers_t hdr, inout meta_t meta);

control Outer(inout headers_t hdr, inout meta_t meta)(InnerT i) {
    action outer_apply(bit<8> v) { hdr.a.v = v; }
    apply { i.apply(hdr, meta); outer_apply(8w2); }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action first(bit<8> v) { meta.m8 = v; }
    Inner() inner;
    Outer(Inner()) outer;
    action last(bit<16> v) { meta.m16 = v; }
    table ot { key = { hdr.a.v: exact; } actions = { first; last; } default_action = first(3); }
    apply { last(16w1); inner.apply(hdr, meta); Inner.apply(hdr, meta); outer.apply(hdr, meta); ot.apply(); }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
