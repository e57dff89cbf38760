// Nothing but actions called from an apply block, and no extern function: p4c writes
// no type_info at all.
#include "common.p4"

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action last(bit<8> x) { meta.m8 = x; }
    action first(bit<8> y) { last(y); }
    apply { first(8w5); }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
