// inout header and struct arguments are copies: what the callee writes to the
// argument's variable some other way (through the enclosing control, an action it
// calls, or a second argument of the same variable) is overwritten when the copy is
// written back at return, exit included.  Runs the same on BMv2.
#include <core.p4>
#include <v1model.p4>

header rec_t { bit<8> tag; bit<8> a; bit<8> b; bit<8> c; bit<8> d; bit<8> e; bit<8> f; bit<8> g; }
struct headers_t { rec_t r; }
struct meta_t { bit<8> unused; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.r); transition accept; }
}

control VC(inout headers_t hdr, inout meta_t meta) { apply { } }

// two parameters bound to one variable: copied back left to right, the second wins
void touch_first(inout rec_t x, inout rec_t y) { x.f = 0xF1; }

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    action write_enclosing(inout headers_t held) { hdr.r.a = 0xA1; }
    action write_both(inout headers_t held) { hdr.r.b = 0xB1; held.r.b = 0xB2; }
    action write_c() { hdr.r.c = 0xC1; }
    action call_writer(inout rec_t held) { write_c(); }
    action write_then_exit(inout rec_t held) { hdr.r.d = 0xD1; exit; }
    action write_first(inout rec_t x, inout rec_t y) { x.e = 0xE1; }
    // bound in a table's action list: the same copy, written back after the action
    action write_g(inout headers_t held, bit<8> v) { hdr.r.g = v; held.r.tag = held.r.tag | 0x80; }
    table bound {
        key = { hdr.r.tag : exact; }
        actions = { write_g(hdr); }
        default_action = write_g(hdr, 0x61);
    }
    apply {
        sm.egress_spec = 1;
        write_enclosing(hdr);       // a: unchanged
        write_both(hdr);            // b: B2, the parameter's
        call_writer(hdr.r);         // c: unchanged
        write_first(hdr.r, hdr.r);  // e: unchanged
        touch_first(hdr.r, hdr.r);  // f: unchanged
        bound.apply();              // g: unchanged, tag: top bit set
        if ((hdr.r.tag & 0x7F) == 1) {
            write_then_exit(hdr.r); // d: unchanged, and nothing below runs
        }
        hdr.r.d = 0xDD;
    }
}

control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.r); } }

V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
