"""What the eBPF target cannot express yet is refused with the construct and its
file:line:col, before anything is loaded (no root needed): never a silent difference."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from softswitch.backends.ebpf import EbpfUnsupported
from softswitch.backends.ebpf.program import generate_c
from softswitch.backends.ebpf.switch import EbpfSwitch
from softswitch.frontend.load import load_source
from softswitch.lowering import lower_program
from softswitch.v1model import V1MODEL

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
#include <core.p4>
#include <v1model.p4>
header h_t {{ bit<8> a; bit<8> b; }}
struct hs {{ h_t h; {extra_hdr} }}
struct m_t {{ bit<8> x; }}
parser P(packet_in pk, out hs hdr, inout m_t m, inout standard_metadata_t sm) {{
    state start {{ pk.extract(hdr.h); transition accept; }}
}}
control V(inout hs hdr, inout m_t m) {{ apply {{ }} }}
control I(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {{
    {decls}
    apply {{
        sm.egress_spec = 2;
        {body}
    }}
}}
control E(inout hs hdr, inout m_t m, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout hs hdr, inout m_t m) {{ apply {{ }} }}
control D(packet_out pk, in hs hdr) {{ apply {{ pk.emit(hdr.h); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"""


def _generate(decls: str = "", body: str = "", extra_hdr: str = "") -> str:
    checked = load_source(PROGRAM.format(decls=decls, body=body, extra_hdr=extra_hdr),
                          filename="t.p4", include_dirs=(str(ROOT / "p4"),))
    return generate_c(lower_program(checked, V1MODEL)).source


def test_supported_program_generates_c() -> None:
    src = _generate(body="hdr.h.b = hdr.h.a + 1;")
    assert "int p4_pipeline(struct __sk_buff *skb)" in src
    assert "P->hdr.h.b = (((u64)P->hdr.h.a + (u64)0x1ULL) & 0xffULL);" in src


@pytest.mark.parametrize("decls, body, extra_hdr, construct, line", [
    ("", "hdr.h.b = (bit<8>)((int<8>)hdr.h.a + 1);", "", "signed", 15),
    ("", "hash(hdr.h.a, HashAlgorithm.random, 8w0, {hdr.h.b}, 8w255);", "", "hash algorithm random", 15),
    ("", "", "bit<128> wide;", "wider than 64 bits", 5),
    ("", 'log_msg("x");', "", "extern log_msg", 15),
], ids=["signed", "hash", "wide", "log_msg"])
def test_unsupported_names_construct_and_location(decls: str, body: str, extra_hdr: str,
                                                  construct: str, line: int) -> None:
    with pytest.raises(EbpfUnsupported) as err:
        _generate(decls, body, extra_hdr)
    msg = str(err.value)
    assert msg.startswith(f"t.p4:{line}:"), msg
    assert "unsupported on --target ebpf" in msg and construct in msg, msg


def test_meter_refused_before_loading() -> None:
    checked = load_source(PROGRAM.format(decls="meter(4, MeterType.packets) mt;",
                                         body="mt.execute_meter(0, m.x);", extra_hdr=""),
                          filename="t.p4", include_dirs=(str(ROOT / "p4"),))
    with pytest.raises(EbpfUnsupported, match=r"^t\.p4:12:\d+: unsupported on --target ebpf: meters"):
        EbpfSwitch.from_checked(checked)


def test_cli_prints_file_line_col(tmp_path: Path) -> None:
    prog = tmp_path / "bad.p4"
    prog.write_text(PROGRAM.format(decls="", body="", extra_hdr="bit<128> wide;"))
    stf = tmp_path / "bad.stf"
    stf.write_text("packet 1 0102\n")
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf",
                          "-I", str(ROOT / "p4"), str(prog), str(stf)],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert f"{prog}:5:" in res.stderr and "error: unsupported on --target ebpf: bit<128>" \
        in res.stderr, res.stderr


def test_unknown_target_is_refused() -> None:
    from softswitch.api import Switch
    from softswitch.errors import CompileError
    with pytest.raises(CompileError, match=r"unknown target 'fpga' \(have: python, ebpf\)"):
        Switch.from_file(ROOT / "p4/examples/ipv4_forward.p4", target="fpga")


def test_switch_process_refuses_what_the_kernel_path_lacks() -> None:
    """Options with no kernel equivalent yet are errors naming the option, not ignored."""
    res = subprocess.run([sys.executable, "-m", "softswitch", "switch", str(ROOT / "p4/examples/ipv4_forward.p4"),
                          "--target", "ebpf", "-i", "1@lo", "--pcap", "captures",
                          "--grpc-server-addr", "none"],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert "--pcap: not supported on --target ebpf yet" in res.stderr, res.stderr
