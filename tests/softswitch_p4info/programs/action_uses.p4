// Which actions P4Info lists, and with which parameters, by how each is used.
#include "common.p4"

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    counter(4, CounterType.packets) only_in_unused;     // instances stay, used or not
    action from_apply(bit<8> x) { meta.m8 = x; }         // listed, no parameters
    action from_action(bit<16> y) {                      // absent; its digest is listed:
        meta.m16 = y;                                    //   it is inlined into the caller,
        digest<learn16_t>(1, {hdr.b.v});                 //   a table action
    }
    action from_both(bit<32> z) { meta.m32 = z; }        // listed, no parameters
    action table_and_apply(bit<8> p) { hdr.a.v = p; }    // table's: keeps p
    action table_and_action(bit<8> q) { hdr.a.v = q; }   // table's: keeps q
    action caller(bit<8> r) { from_action(16w3); from_both(32w4); table_and_action(r); }
    action directional(inout bit<8> io, bit<8> k) { io = io + k; }   // listed, no parameters
    action chain_end(bit<8> c) { meta.m8 = c; }          // absent
    action chain_mid(bit<8> c) { chain_end(c); }         // absent
    action chain_top() { chain_mid(8w5); }               // listed
    action unused() { digest<learn8_t>(1, {hdr.a.v}); only_in_unused.count(0); }  // absent
    @name("renamed") action named_from_apply(bit<8> v) { meta.m8 = v; }
    action in_switch(bit<8> s) { meta.m8 = s; }
    action other() { }
    table t {
        key = { hdr.a.v: exact; }
        actions = { caller; table_and_apply; table_and_action; NoAction; }
        default_action = NoAction();
    }
    @hidden action hidden_action() { }                   // absent
    action via_hidden_table(bit<8> h) { meta.m8 = h; }   // listed: the table is absent, not its uses
    @hidden table hidden_table {
        key = { hdr.a.v: exact; }
        actions = { hidden_action; via_hidden_table; }
        default_action = hidden_action();
    }
    table no_default {                                   // NoAction becomes its default
        key = { hdr.a.v: exact; }
        actions = { in_switch; other; }
    }
    apply {
        table_and_apply(8w9);
        t.apply();
        from_apply(8w1);
        from_both(32w7);
        directional(meta.m8, 8w2);
        chain_top();
        hidden_table.apply();
        named_from_apply(8w6);
        switch (no_default.apply().action_run) {
            in_switch: { other(); }
            default: { }
        }
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
