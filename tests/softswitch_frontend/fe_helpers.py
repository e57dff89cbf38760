"""Shared helpers for the front-end tests: wrap snippets into a complete v1model program."""
from __future__ import annotations

from softswitch.frontend import CheckedProgram, load_source

PRELUDE = """#include <core.p4>
#include <v1model.p4>
header h8_t { bit<8> v; }
header h16_t { bit<16> v; }
struct headers_t { h8_t a; h16_t b; h8_t[4] st; }
struct meta_t { bit<8> m8; bit<16> m16; bit<32> m32; bool f; }
"""

PARSER = """
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { pkt.extract(hdr.a); transition accept; }
}
"""

TAIL = """
control VC(inout headers_t hdr, inout meta_t meta) { apply { } }
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t hdr, inout meta_t meta) { apply { } }
control D(packet_out pkt, in headers_t hdr) { apply { pkt.emit(hdr.a); } }
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def ingress(body: str, locals_: str = "", top: str = "", parser: str = PARSER) -> str:
    """A full program whose ingress runs ``body`` (with ``locals_`` declared before apply)."""
    return (PRELUDE + top + parser
            + "control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {\n"
            + locals_ + "\n    apply {\n" + body + "\n    }\n}\n" + TAIL)


def check(src: str, filename: str = "t.p4") -> CheckedProgram:
    return load_source(src, filename=filename)


def line_of(src: str, needle: str) -> int:
    """1-based line of the first occurrence of ``needle`` in ``src``."""
    for i, line in enumerate(src.split("\n"), start=1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in source")
