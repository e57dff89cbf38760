// What nothing uses is dropped before P4Info is written: a table never applied (and
// the actions only it names), calls under a constant false condition, a direct counter
// no table names. An extern instance stays, used or not; a table applied in another
// table's key is applied.
#include "common.p4"

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(4, CounterType.packets) never_referenced;    // listed
    direct_counter(CounterType.packets) loose;           // absent
    action only_in_unapplied(bit<8> v) { meta.m8 = v; }  // absent
    table never_applied { key = { hdr.a.v: exact; } actions = { only_in_unapplied; } }
    action in_dead_branch(bit<8> v) { meta.m8 = v; }     // absent
    action live(bit<8> v) { meta.m8 = v; }               // listed, no parameters
    action after_exit(bit<8> v) { meta.m8 = v; }         // listed: p4c keeps code after exit
    table in_key { key = { hdr.a.v: exact; } actions = { NoAction; } }
    table outer { key = { in_key.apply().hit: exact @name("in_key_hit"); } actions = { NoAction; } }
    apply {
        outer.apply();
        if (false) { in_dead_branch(8w1); } else { live(8w2); }
        exit;
        after_exit(8w3);
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
