// Every operator on bit<8> / int<8> / bool, one output field each; the test
// compares the outputs with P4 semantics computed in Python for many inputs.
#include <core.p4>
#include <v1model.p4>

header in_t { bit<8> a; bit<8> b; int<8> sa; int<8> sb; bit<3> sh; bit<5> pad; }
header out_t {
    bit<8> add; bit<8> sub; bit<8> mul; bit<8> div; bit<8> mod;
    bit<8> sat_add; bit<8> sat_sub; int<8> ssat_add; int<8> ssat_sub;
    int<8> sadd; int<8> ssub; int<8> sneg; bit<8> neg; bit<8> not_;
    bit<8> and_; bit<8> or_; bit<8> xor_; bit<8> shl; bit<8> shr; int<8> sshr; bit<8> shl_var;
    bit<16> concat; bit<4> slice; bit<8> cast_s2u; int<8> cast_u2s; bit<16> widen; int<16> swiden;
    bit<4> narrow; bit<8> cond; bit<8> cmp; bit<8> scmp; bit<8> logic; bit<8> set_slice;
    bit<8> pre_inc;
}
struct headers_t { in_t i; out_t o; }
struct meta_t { }

parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.i); transition accept; }
}
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    apply {
        bit<8> a = hdr.i.a;
        bit<8> b = hdr.i.b;
        int<8> sa = hdr.i.sa;
        int<8> sb = hdr.i.sb;
        hdr.o.setValid();
        hdr.o.add = a + b;
        hdr.o.sub = a - b;
        hdr.o.mul = a * b;
        if (b != 0) { hdr.o.div = a / b; hdr.o.mod = a % b; }
        hdr.o.sat_add = a |+| b;
        hdr.o.sat_sub = a |-| b;
        hdr.o.ssat_add = sa |+| sb;
        hdr.o.ssat_sub = sa |-| sb;
        hdr.o.sadd = sa + sb;
        hdr.o.ssub = sa - sb;
        hdr.o.sneg = -sa;
        hdr.o.neg = -a;
        hdr.o.not_ = ~a;
        hdr.o.and_ = a & b;
        hdr.o.or_ = a | b;
        hdr.o.xor_ = a ^ b;
        hdr.o.shl = a << 3;
        hdr.o.shr = a >> 3;
        hdr.o.sshr = sa >> 2;
        hdr.o.shl_var = a << hdr.i.sh;
        hdr.o.concat = a ++ b;
        hdr.o.slice = a[6:3];
        hdr.o.cast_s2u = (bit<8>) sa;
        hdr.o.cast_u2s = (int<8>) a;
        hdr.o.widen = (bit<16>) a;
        hdr.o.swiden = (int<16>) sa;
        hdr.o.narrow = (bit<4>) a;
        hdr.o.cond = a > b ? a : b;
        hdr.o.cmp = (a == b ? 8w1 : 8w0) | (a != b ? 8w2 : 8w0) | (a < b ? 8w4 : 8w0)
                  | (a <= b ? 8w8 : 8w0) | (a > b ? 8w16 : 8w0) | (a >= b ? 8w32 : 8w0);
        hdr.o.scmp = (sa < sb ? 8w1 : 8w0) | (sa >= sb ? 8w2 : 8w0);
        bool x = a > 8w100;
        bool y = b > 8w100;
        hdr.o.logic = ((x && y) ? 8w1 : 8w0) | ((x || y) ? 8w2 : 8w0) | ((!x) ? 8w4 : 8w0);
        bit<8> s = a;
        s[3:0] = b[7:4];
        hdr.o.set_slice = s;
        hdr.o.pre_inc = a + 1;
        sm.egress_spec = 1;
    }
}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.o); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
