// Parser constructs for the eBPF target's differential test: select on tuples with
// masks, ranges and don't-cares, verify(), lookahead of bits and of a header,
// PacketTooShort; ingress reports the path and the parser error in a header, through
// a directly invoked control.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header h8_t { bit<8> v; }
header h16_t { bit<16> v; }
header big_t { bit<64> v; }
header peek_t { bit<4> hi; bit<4> lo; bit<8> next; }
header rep_t { bit<8> path; bit<8> err; bit<16> peeked; }
struct headers_t { eth_t eth; h8_t a; h8_t b; h16_t c; big_t big; rep_t rep; }
struct meta_t { bit<8> path; bit<16> peeked; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        meta.peeked = pkt.lookahead<bit<16>>();
        transition select(pkt.lookahead<peek_t>().hi, hdr.eth.type) {
            (0x1, 0x0800 &&& 0xff00): two;
            (0x2 .. 0x5, _): two;
            (_, 0x88b5): deep;
            default: accept;
        }
    }
    state two {
        pkt.extract(hdr.a);
        pkt.extract(hdr.b);
        transition select(hdr.a.v, hdr.b.v) {
            (0x10 &&& 0xF0, _): masked;
            (0x20 .. 0x2F, 0x01): ranged;
            (0x30, _): check;
            (0x40, _): toolong;
            default: accept;
        }
    }
    state deep { meta.path = 9; pkt.extract(hdr.big); transition accept; }
    state masked { meta.path = 1; pkt.extract(hdr.c); transition accept; }
    state ranged { meta.path = 2; transition accept; }
    state check { meta.path = 3; verify(hdr.b.v != 0, error.NoMatch); meta.path = 7; transition accept; }
    state toolong { meta.path = 4; pkt.extract(hdr.big); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Flag(inout rep_t rep, in bit<8> bit_) {
    apply { if (rep.err != 0) { rep.err = rep.err | bit_; } }
}

control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 2;
        hdr.rep.setValid();
        hdr.rep.path = meta.path;
        hdr.rep.peeked = meta.peeked;
        if (sm.parser_error == error.NoError) { hdr.rep.err = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.rep.err = 1; }
        else if (sm.parser_error == error.NoMatch) { hdr.rep.err = 2; }
        else { hdr.rep.err = 0xFF; }
        Flag.apply(hdr.rep, 0x80);          // a direct invocation
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.eth); pkt.emit(hdr.rep); pkt.emit(hdr.a); pkt.emit(hdr.b);
        pkt.emit(hdr.c); pkt.emit(hdr.big);
    }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
