// Sub-parsers on both targets (the eBPF target inlines each apply as labels of its
// parser): an instance extracting into the caller's header stack with `verify` and an
// `out` scalar, applied in a loop from a sub-parser that is itself an instance (its
// own locals, select and loop back to its start); constructor arguments (a constant,
// an instance declared beside it, one made in place); a value set inside a
// sub-parser (outside the loop: matched in each pass of a loop over the stack, its
// bounded scan took the verifier past its 1 M instructions); a direct invocation; an
// `out` header (invalidated first) and an `in` one (a copy); two `inout` arguments of
// one variable (copies, copied back in order); `reject` and a select matching no
// case (error.NoMatch) inside a sub-parser. What the parser left (errors, counts,
// validity) is written into h1.
#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
header h1_t {
    bit<8> hdr_type; bit<8> op; bit<8> count; bit<8> last_next;
    bit<8> tag; bit<8> err; bit<8> valid_bits; bit<8> next_hdr_type;
}
header h2_t { bit<8> hdr_type; bit<8> f1; bit<8> f2; bit<8> next_hdr_type; }
header h3_t { bit<8> hdr_type; bit<8> data; }
header opt_t { bit<8> kind; bit<8> len; }

struct headers { eth_t eth; h1_t h1; h2_t[4] h2; h3_t h3; opt_t opt; }
struct metadata { bit<8> last_next; bit<8> count; bit<8> tag; }

error { BadHeaderType }

// one h2 into the caller's stack
parser OneH2(packet_in pkt, inout headers hdr, out bit<8> next_type) {
    state start {
        pkt.extract(hdr.h2.next);
        verify(hdr.h2.last.hdr_type == 2, error.BadHeaderType);
        next_type = hdr.h2.last.next_hdr_type;
        transition accept;
    }
}

// h2 headers while they say another follows (a sub-parser applying a sub-parser)
parser H2Chain(packet_in pkt, inout headers hdr, inout metadata meta) {
    OneH2() one;
    bit<8> nt = 0;
    state start {
        one.apply(pkt, hdr, nt);
        meta.count = meta.count + 1;
        transition select(nt) {
            2: start;
            0xEE: reject;
            default: done;
        }
    }
    state done {
        meta.last_next = nt;
        transition accept;
    }
}

// an option: skipped when of the kind it was made to skip, extracted when wanted or
// when its kind is in the value set `kinds`
parser Opt(packet_in pkt, out opt_t opt, in bit<8> want, inout bit<8> seen)(bit<8> skip_kind) {
    value_set<bit<8>>(4) kinds;
    bit<8> k;
    state start {
        k = pkt.lookahead<bit<8>>();
        seen = seen + 1;
        transition select(k == skip_kind, k == want, k) {
            (true, _, _): skip;
            (false, true, _): take;
            (false, false, 0xFF): reject;
            default: listed;
        }
    }
    state listed {
        transition select(k) {       // no default: a kind over 0x7F not listed is NoMatch
            kinds: take;
            0 .. 0x7F: accept;
        }
    }
    state skip { pkt.advance(16); transition accept; }
    state take { pkt.extract(opt); transition accept; }
}

parser OneH2T(packet_in pkt, inout headers hdr, out bit<8> next_type);

// applies the parser it was given (a constructor argument that is an instance)
parser Wrap(packet_in pkt, inout headers hdr, out bit<8> nt)(OneH2T inner) {
    state start {
        inner.apply(pkt, hdr, nt);
        transition accept;
    }
}

// an `in` header: a copy
parser Peek(packet_in pkt, in h3_t x, out bit<8> d) {
    state start {
        d = x.data;
        transition accept;
    }
}

parser Both(packet_in pkt, inout h3_t x, inout h3_t y) {
    state start {
        x.data = x.data + 1;
        y.hdr_type = y.data;
        transition accept;
    }
}

parser TopP(packet_in pkt, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    H2Chain() chain;
    Opt(8w0xAA) opt1;
    Both() both;
    OneH2() one2;
    Wrap(one2) wrap;
    Wrap(OneH2()) wrap2;
    Peek() peek;
    state start {
        pkt.extract(hdr.eth);
        transition select(hdr.eth.type) {
            0x88b5: parse_h1;
            default: accept;
        }
    }
    state parse_h1 {
        pkt.extract(hdr.h1);
        verify(hdr.h1.hdr_type == 1, error.BadHeaderType);
        transition select(hdr.h1.next_hdr_type) {
            2: h2s;
            3: h3;
            4: opt;
            default: accept;
        }
    }
    state h2s {
        chain.apply(pkt, hdr, meta);
        transition select(meta.last_next) {
            3: h3;
            4: opt;
            default: accept;
        }
    }
    state h3 {
        pkt.extract(hdr.h3);
        both.apply(pkt, hdr.h3, hdr.h3);
        peek.apply(pkt, hdr.h3, meta.tag);
        transition select(hdr.h3.data) {
            2: w1;
            3: w2;
            default: accept;
        }
    }
    state w1 {
        wrap.apply(pkt, hdr, meta.last_next);
        transition accept;
    }
    state w2 {
        wrap2.apply(pkt, hdr, meta.last_next);
        transition accept;
    }
    state opt {
        opt1.apply(pkt, hdr.opt, hdr.h1.op, meta.tag);
        OneH2.apply(pkt, hdr, meta.last_next);
        transition accept;
    }
}

control V(inout headers hdr, inout metadata meta) { apply { } }

control I(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        if (!hdr.h1.isValid()) {
            return;
        }
        hdr.h1.count = meta.count;
        hdr.h1.last_next = meta.last_next;
        hdr.h1.tag = meta.tag;
        if (sm.parser_error == error.NoError) { hdr.h1.err = 0; }
        else if (sm.parser_error == error.PacketTooShort) { hdr.h1.err = 1; }
        else if (sm.parser_error == error.StackOutOfBounds) { hdr.h1.err = 2; }
        else if (sm.parser_error == error.BadHeaderType) { hdr.h1.err = 3; }
        else if (sm.parser_error == error.NoMatch) { hdr.h1.err = 4; }
        else { hdr.h1.err = 0xFF; }
        hdr.h1.valid_bits = 0;
        if (hdr.h2[0].isValid()) { hdr.h1.valid_bits[0:0] = 1; }
        if (hdr.h2[1].isValid()) { hdr.h1.valid_bits[1:1] = 1; }
        if (hdr.h2[2].isValid()) { hdr.h1.valid_bits[2:2] = 1; }
        if (hdr.h2[3].isValid()) { hdr.h1.valid_bits[3:3] = 1; }
        if (hdr.h3.isValid()) { hdr.h1.valid_bits[4:4] = 1; }
        if (hdr.opt.isValid()) { hdr.h1.valid_bits[5:5] = 1; }
    }
}

control E(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }

control D(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr.eth);
        pkt.emit(hdr.h1);
        pkt.emit(hdr.h2);
        pkt.emit(hdr.h3);
        pkt.emit(hdr.opt);
    }
}

V1Switch(TopP(), V(), I(), E(), C(), D()) main;
