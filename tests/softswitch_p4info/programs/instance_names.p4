// Instance names: a block of main is named after its type (its @name is not used); a
// direct invocation inside a control instantiated twice makes one anonymous instance
// in each, with its own tables and actions.
#include "common.p4"

control Inner(inout headers_t hdr) {
    action add(bit<8> v) { hdr.a.v = hdr.a.v + v; }
    table t { key = { hdr.a.v: exact; } actions = { add; NoAction; } default_action = NoAction(); }
    apply { t.apply(); }
}

control Outer(inout headers_t hdr) {
    apply { Inner.apply(hdr); }
}

@name("Renamed")
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    Outer() o1;
    Outer() o2;
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table top { key = { hdr.a.v: exact; } actions = { fwd; } default_action = fwd(1); }
    apply { top.apply(); o1.apply(hdr); o2.apply(hdr); }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
