"""What the eBPF target cannot express yet is refused with the construct and its
file:line:col, before anything is loaded (no root needed): never a silent difference."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from softswitch.backends.ebpf import EbpfUnsupported
from softswitch.backends.ebpf.program import generate_c
from softswitch.frontend.load import load_source
from softswitch.lowering import lower_program
from softswitch.targets.ebpf.switch import EbpfSwitch
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
    assert "int p4_pipeline(P4_CTX *ctx)" in src and "#define P4_CTX struct __sk_buff" in src
    assert "P->hdr.h.b = (((u64)P->hdr.h.a + (u64)0x1ULL) & 0xffULL);" in src


@pytest.mark.parametrize("decls, body, extra_hdr, construct, line", [
    ("", "verify_checksum_with_payload(true, { hdr.h.a }, hdr.h.b, HashAlgorithm.crc16);", "",
     "crc16 with the payload", 15),
    ("", "", "bit<256> wide;", "wider than 128 bits", 5),
    ("", "hdr.h.a = (bit<8>)(bit<72>)(hdr.s / 3);", "int<72> s;", "operator / on values over 64 bits", 15),
    ("", 'log_msg("x");', "", "extern log_msg", 15),
], ids=["crc16_payload", "wide", "signed72_divide", "log_msg"])
def test_unsupported_names_construct_and_location(decls: str, body: str, extra_hdr: str,
                                                  construct: str, line: int) -> None:
    with pytest.raises(EbpfUnsupported) as err:
        _generate(decls, body, extra_hdr)
    msg = str(err.value)
    assert msg.startswith(f"t.p4:{line}:"), msg
    assert "unsupported on --target ebpf" in msg and construct in msg, msg


def test_header_field_over_128_bits_moves_with_its_header_only() -> None:
    """A header field wider than any C integer is held as its bytes: extracted and
    emitted (not refused), but an expression reading it is refused naming the limit."""
    wide = PROGRAM.replace("header h_t {{ bit<8> a; bit<8> b; }}", "header h_t {{ bit<8> a; bit<8> b; bit<200> w; }}")
    checked = load_source(wide.format(decls="", body="", extra_hdr=""), filename="t.p4",
                          include_dirs=(str(ROOT / "p4"),))
    src = generate_c(lower_program(checked, V1MODEL)).source
    assert "u8 w__b24;" in src and "u8 w__b25;" not in src
    checked = load_source(wide.format(decls="", body="hdr.h.a = hdr.h.w[7:0];", extra_hdr=""),
                          filename="t.p4", include_dirs=(str(ROOT / "p4"),))
    with pytest.raises(EbpfUnsupported, match=r"^t\.p4:15:\d+: unsupported on --target ebpf: bit<200> "
                                              r"\(wider than 128 bits: BPF registers hold 64"):
        generate_c(lower_program(checked, V1MODEL))


def test_wide_value_set_refused_before_loading() -> None:
    text = PROGRAM.format(decls="", body="", extra_hdr="").replace(
        "    state start {", "    value_set<bit<72>>(4) vs;\n    state start {")
    checked = load_source(text, filename="t.p4", include_dirs=(str(ROOT / "p4"),))
    with pytest.raises(EbpfUnsupported, match=r"^t\.p4:8:\d+: unsupported on --target ebpf: "
                                              r"value_set vs of 72 bits"):
        EbpfSwitch.from_checked(checked)



def test_cli_prints_file_line_col(tmp_path: Path) -> None:
    prog = tmp_path / "bad.p4"
    prog.write_text(PROGRAM.format(decls="", body="", extra_hdr="bit<256> wide;"))
    stf = tmp_path / "bad.stf"
    stf.write_text("packet 1 0102\n")
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--target", "ebpf",
                          "-I", str(ROOT / "p4"), str(prog), str(stf)],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2
    assert f"{prog}:5:" in res.stderr and "error: unsupported on --target ebpf: bit<256>" \
        in res.stderr, res.stderr


def test_unknown_target_is_refused() -> None:
    from softswitch.errors import CompileError
    from softswitch.targets.python.switch import Switch
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


def _generate_xdp(decls: str = "", body: str = "") -> str:
    checked = load_source(PROGRAM.format(decls=decls, body=body, extra_hdr=""),
                          filename="t.p4", include_dirs=(str(ROOT / "p4"),))
    return generate_c(lower_program(checked, V1MODEL), hook="xdp").source


def test_xdp_hook_generates_the_shared_pipeline_with_its_primitives() -> None:
    src = _generate_xdp(body="hdr.h.b = hdr.h.a + 1;")
    assert "int p4_pipeline(P4_CTX *ctx)" in src and "#define P4_CTX struct xdp_md" in src
    assert "bpf_xdp_load_bytes" in src and "bpf_skb_" not in src
    assert "bpf_clone_redirect" not in src and "p4_clone_slots" not in src   # no copies on XDP
    assert "P->hdr.h.b = (((u64)P->hdr.h.a + (u64)0x1ULL) & 0xffULL);" in src


@pytest.mark.parametrize("decls, body, construct, line", [
    ("", "clone(CloneType.I2E, 5);", "clone: clones", 15),
    ("", "clone_preserving_field_list(CloneType.E2E, 5, 0);", "clone_preserving_field_list: clones", 15),
    ("", "resubmit_preserving_field_list(0);", "resubmit_preserving_field_list: resubmit", 15),
    ("", "recirculate_preserving_field_list(0);", "recirculate_preserving_field_list: recirculate", 15),
    ("", "sm.mcast_grp = 3;", "multicast (standard_metadata.mcast_grp", 15),
    ("action flood(bit<16> g) { sm.mcast_grp = g; }", "flood(7);", "multicast", 12),
], ids=["clone", "e2e", "resubmit", "recirculate", "mcast", "mcast-action"])
def test_xdp_refuses_copies_with_their_location(decls: str, body: str, construct: str, line: int) -> None:
    """XDP has no socket buffer to clone or mark: copies are refused, never dropped."""
    with pytest.raises(EbpfUnsupported) as err:
        _generate_xdp(decls, body)
    msg = str(err.value)
    assert msg.startswith(f"t.p4:{line}:"), msg
    assert construct in msg and "--hook xdp" in msg and "use --hook tc" in msg, msg


def test_xdp_refuses_a_queue_rate_option() -> None:
    """XDP_REDIRECT skips the egress qdisc: a paced port would run unshaped."""
    from softswitch.switchd.errors import OptionError
    from softswitch.switchd.options import ALL_PORTS, SwitchOptions
    from softswitch.targets.ebpf.daemon import check_ebpf_options
    ok = SwitchOptions(program="x.p4", hook="xdp", queue_depths_pkts={2: 64})
    check_ebpf_options(ok)
    for rates, shown in (({2: 40e6}, "--queue-rate 2:40 "), ({ALL_PORTS: 10e6}, "--queue-rate 10 ")):
        with pytest.raises(OptionError, match=f"^{shown}with --hook xdp: XDP_REDIRECT bypasses"):
            check_ebpf_options(SwitchOptions(program="x.p4", hook="xdp", queue_rates_bps=rates))
    with pytest.raises(OptionError, match="--xdp-mode needs --hook xdp"):
        check_ebpf_options(SwitchOptions(program="x.p4", xdp_mode="native"))
    # a rate set while running: refused before anything changes
    from softswitch.targets.ebpf.daemon import EbpfSwitchd
    sd = EbpfSwitchd(SwitchOptions(program="x.p4", hook="xdp", interfaces={2: "veth0"}))
    with pytest.raises(EbpfUnsupported, match="queue rate on port 2 .40 Mbit/s. with --hook xdp"):
        sd.set_queue(2, rate_bps=40e6)
    assert sd.opts.queue_rates_bps == {}


def test_python_target_refuses_a_hook(tmp_path: Path) -> None:
    res = subprocess.run([sys.executable, "-m", "softswitch", "stf", "--hook", "xdp",
                          str(ROOT / "p4/examples/ipv4_forward.p4"), str(ROOT / "p4/examples/ipv4_forward.stf")],
                         check=False, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert res.returncode == 2 and "a kernel hook needs target 'ebpf'" in res.stderr, res.stderr
