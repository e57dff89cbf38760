"""Helpers of the softswitch back-end tests (a uniquely named module: every test folder
has its own conftest, so helpers are imported from here, not from conftest)."""
from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
P4DIR = HERE / "p4"
EXAMPLES = ROOT / "p4" / "examples"


def load(path: Path | str, **kw):
    from softswitch.targets.python.switch import Switch
    return Switch.from_file(path, **kw)


def from_source(src: str):
    """A Switch from P4 source text (errors name ``case.p4``)."""
    from softswitch.targets.python.switch import Switch
    return Switch.from_source(src, filename="case.p4")


def run_stf(sw, text: str) -> None:
    """Run an STF text on ``sw``; it must pass and check at least one packet."""
    from softswitch.stf import StfRunner, parse_stf
    res = StfRunner(sw).run(parse_stf(text, "case.stf"), "case.stf")
    assert res.ok, "\n".join(res.failures)
    assert res.packets_checked, "the case checked no packet"


V1_TEMPLATE = """
#include <core.p4>
#include <v1model.p4>
{decls}
parser P(packet_in pkt, out headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{parser}
}}
control VC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control Ing(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{ingress}
}}
control Eg(inout headers_t hdr, inout meta_t meta, inout standard_metadata_t sm) {{
{egress}
}}
control CC(inout headers_t hdr, inout meta_t meta) {{ apply {{ }} }}
control D(packet_out pkt, in headers_t hdr) {{ apply {{ {deparser} }} }}
V1Switch(P(), VC(), Ing(), Eg(), CC(), D()) main;
"""


def program(*, decls: str, parser: str, ingress: str, egress: str = "apply { }", deparser: str,
            **kw):
    """A Switch from a small v1model program made of the given pieces."""
    from softswitch.targets.python.switch import Switch
    src = V1_TEMPLATE.format(decls=decls, parser=parser, ingress=ingress, egress=egress,
                             deparser=deparser)
    return Switch.from_source(src, filename="test.p4", **kw)
