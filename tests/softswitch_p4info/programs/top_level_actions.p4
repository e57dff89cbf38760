// Top-level actions are copied into each control that uses them: the first control
// (in main's order) decides how one is listed, and a control lists the copies of
// top-level actions before its own actions.
#include "common.p4"

action set_either(bit<8> g) { }      // ingress calls it (listed without g), egress's table lists it
action set_later(bit<8> g) { }
action listed_first() { }
action called_last(bit<8> h) { }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action own_before() { }
    table ti { key = { hdr.a.v: exact; } actions = { own_before; listed_first; } }
    action own_after(bit<8> w) { meta.m8 = w; }
    apply { called_last(8w2); ti.apply(); own_after(8w3); set_either(8w1); }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    table te {
        key = { hdr.a.v: exact; }
        actions = { set_either; set_later; NoAction; }
        default_action = NoAction();
    }
    apply { te.apply(); }
}

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
