// A varbit option whose length comes from a lookahead: extracted, emitted, removed;
// too long (HeaderTooShort) and cut short (PacketTooShort) reported in a header; a
// digest of each option.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header opt_fixed_t { bit<8> kind; bit<8> len; }
header opt_t { bit<8> kind; bit<8> len; varbit<256> data; }
header rep_t { bit<8> err; }
struct headers_t { eth_t eth; rep_t rep; opt_t opt; }
struct meta_t { }
struct opt_digest_t { bit<8> kind; bit<8> len; bit<9> port; }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) { 0x88b6: opt; default: accept; }
    }
    state opt {
        bit<8> l = pkt.lookahead<opt_fixed_t>().len;
        pkt.extract(hdr.opt, (bit<32>)l * 8);
        transition accept;
    }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.rep.setValid();
        if (sm.parser_error == error.PacketTooShort) { hdr.rep.err = 1; }
        else if (sm.parser_error == error.HeaderTooShort) { hdr.rep.err = 2; }
        else { hdr.rep.err = 0; }
        if (hdr.opt.isValid() && hdr.opt.kind != 5) {
            digest<opt_digest_t>(1, { hdr.opt.kind, hdr.opt.len, sm.ingress_port });
        }
        if (hdr.opt.isValid() && hdr.opt.kind == 1) {
            hdr.opt.setInvalid();
            hdr.eth.type = 0x0800;
        } else if (hdr.opt.isValid()) {
            hdr.opt.kind = hdr.opt.kind + 1;
        }
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) {
    apply { pkt.emit(hdr.eth); pkt.emit(hdr.rep); pkt.emit(hdr.opt); }
}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
