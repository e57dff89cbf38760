"""The program as a whole: `softswitch check`, the P4Info control-plane contract of
p4/README.md, compile-time options, and the STF tests through `softswitch stf`."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import make_stf
import pytest

from tests.helpers.p4int import (
    H2_MAC,
    PROGRAM,
    ROOT,
    IntSwitch,
    compile_program,
    load_checked,
    roce_frame,
    split_int,
)

HERE = Path(__file__).resolve().parent
STF_FILES = sorted(HERE.glob("*.stf"))


def softswitch(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "softswitch", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("defines", [[], ["-DINT_UDP_PORT=5000", "-DINT_WATCH_ANY_UDP"]])
def test_softswitch_check_accepts_the_program(tmp_path, defines):
    out = tmp_path / "p4info.txtpb"
    res = softswitch("check", str(PROGRAM), "--p4info", str(out), *defines)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    assert out.stat().st_size > 0


def p4info(tmp_path: Path):
    from google.protobuf import text_format
    from p4.config.v1 import p4info_pb2
    out = tmp_path / "p4info.txtpb"
    assert softswitch("check", str(PROGRAM), "--p4info", str(out)).returncode == 0
    return text_format.Parse(out.read_text(), p4info_pb2.P4Info())


def test_p4info_matches_the_documented_contract(tmp_path):
    from p4.config.v1 import p4info_pb2
    info = p4info(tmp_path)
    actions = {a.preamble.id: a for a in info.actions}
    tables = {t.preamble.name: t for t in info.tables}
    want_tables = {
        "SwitchIngress.ipv4_lpm": ([("dst_addr", 3)], {"ipv4_forward": ["port", "src_mac", "dst_mac"]}),
        "SwitchIngress.arp_proxy": ([("target_ip", 2)], {"arp_reply": ["mac"]}),
        "SwitchIngress.int_watchlist": (
            [("src_addr", 3), ("dst_addr", 3), ("src_port", 3), ("dst_port", 3), ("dscp", 3)],
            {"int_source": ["instruction_bitmap", "ds_instruction", "max_hops"]}),
        "SwitchIngress.int_sink": ([("egress_port", 2)],
                                   {"sink_report": [], "sink_host": [], "sink_none": []}),
        "SwitchIngress.report_sampling": ([], {"set_report_sampling": ["mask"]}),
        "SwitchEgress.switch_config": ([], {"set_switch_config": ["node_id"]}),
        "SwitchEgress.port_line_rate": ([("port", 2)], {"set_line_rate": ["line_rate_mbps"]}),
        "SwitchEgress.port_mtu": ([("egress_port", 2)], {"set_mtu": ["mtu"]}),
        "SwitchEgress.fabric_port": ([("egress_port", 2)], {"set_fabric": []}),
        "SwitchEgress.ecn_config": ([("egress_port", 2)],
                                    {"set_ecn_thresholds": ["kmin_bytes", "kmax_bytes", "pmax"]}),
        "SwitchEgress.report_config": ([], {"set_report_config": [
            "switch_mac", "collector_mac", "switch_ip", "collector_ip", "collector_port",
            "payload_bytes", "hw_id"]}),
        "SwitchEgress.report_collector": ([("egress_rid", 2)], {"set_report_collector": [
            "collector_mac", "collector_ip", "collector_port"]}),
    }
    assert set(tables) == set(want_tables)
    for name, (keys, acts) in want_tables.items():
        t = tables[name]
        got_keys = [f.name for f in t.match_fields]
        assert got_keys == [k for k, _ in keys], name
        names = {actions[r.id].preamble.name.split(".")[-1]: actions[r.id] for r in t.action_refs}
        for act, params in acts.items():
            assert act in names, (name, act, sorted(names))
            assert [p.name for p in names[act].params] == params, (name, act)
    kinds = {f.name: f.match_type for f in tables["SwitchIngress.int_watchlist"].match_fields}
    assert set(kinds.values()) == {p4info_pb2.MatchField.TERNARY}
    assert tables["SwitchIngress.ipv4_lpm"].match_fields[0].match_type == p4info_pb2.MatchField.LPM
    registers = {r.preamble.name for r in info.registers}
    assert registers >= {
        "SwitchIngress.link_rx_expected", "SwitchIngress.link_lost_packets",
        "SwitchIngress.link_reordered_packets", "SwitchIngress.link_loss_events",
        "SwitchIngress.link_resyncs", "SwitchIngress.report_candidates",
        "SwitchEgress.link_tx_seq", "SwitchEgress.tx_bytes",
        "SwitchEgress.last_queue_occupancy", "SwitchEgress.last_hop_latency",
        "SwitchEgress.report_seq"}
    counters = {c.preamble.name for c in info.counters}
    assert counters >= {"SwitchIngress.ingress_port_counter", "SwitchEgress.egress_port_counter",
                        "SwitchEgress.ecn_marked"}
    assert {c.preamble.name for c in info.direct_counters} == {
        "SwitchIngress.int_watchlist_counter"}
    assert [d.preamble.name for d in info.digests] == ["link_loss_digest_t"]


def test_p4info_lists_top_level_externs(tmp_path):
    info = p4info(tmp_path)
    assert "queue_bytes" in {r.preamble.name for r in info.registers}
    assert {"drop_reasons", "int_events"} <= {c.preamble.name for c in info.counters}


def test_int_udp_port_is_a_compile_time_option():
    checked = load_checked({"INT_UDP_PORT": "5000", "INT_WATCH_ANY_UDP": "1"})
    s = IntSwitch.build(1, compile_program(checked))
    s.route("10.0.2.0", 24, 2, H2_MAC)
    s.watch(dst_port=(1234, 0xFFFF))
    (_port, data), = s.process(1, roce_frame(dport=1234))
    assert struct.unpack_from("!H", data, 36)[0] == 5000
    assert struct.unpack_from("!H", data, 44)[0] == 1234


def test_only_rocev2_is_watched_by_default(make_program):
    s = IntSwitch.build(1, make_program())
    s.route("10.0.2.0", 24, 2, H2_MAC)
    s.watch(dst_port=(0, 0))                            # an entry matching every UDP flow
    (_port, data), = s.process(1, roce_frame(dport=1234))
    assert split_int(data)["udp"][1] == 1234
    (_port, data), = s.process(1, roce_frame())
    assert split_int(data)["udp"][1] == 7777


@pytest.mark.parametrize("stf", STF_FILES, ids=[p.name for p in STF_FILES])
def test_stf(stf):
    res = softswitch("stf", "--strict", str(PROGRAM), str(stf))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "PASS" in res.stdout


def test_stf_files_are_up_to_date():
    """The committed STF files are what make_stf.py writes."""
    assert (HERE / "int_source.stf").read_text() == make_stf.source_stf()
    assert (HERE / "int_report.stf").read_text() == make_stf.report_stf()
    assert (HERE / "link_seq.stf").read_text() == make_stf.link_seq_stf()
    assert (HERE / "single_switch.entries").read_text() == make_stf.entries_file()


def test_softswitch_run_with_the_example_entries():
    """The README's one-switch example: INT source and report-mode sink together."""
    res = softswitch("run", str(PROGRAM), "--entries", str(HERE / "single_switch.entries"),
                     "--port", "1", "--packet", roce_frame().hex(), "--json")
    assert res.returncode == 0, res.stderr
    (result,) = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    outs = {o["port"]: bytes.fromhex(o["data"]) for o in result["out"]}
    assert sorted(outs) == [2, 3]
    assert struct.unpack_from("!H", outs[2], 36)[0] == 4791           # restored
    assert struct.unpack_from("!H", outs[3], 36)[0] == 32766          # the report
